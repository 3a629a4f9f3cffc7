// The backend × case table: pass / FAIL / not claimed.
//
// A gtest listener collects each case's outcome per backend. At the end of a run, every
// backend's results are written to <dir>/results/<backend>.tsv; then the table is rebuilt
// from the result files of every compiled backend (so the unit run and the integration run
// fill one table), printed, and written as Markdown to <dir>/conformance-table.md.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dlock::conformance {

// What a skip must say to count as "not claimed"; any other skip is a failure.
inline constexpr const char* kNotClaimed = "not claimed: ";

class ResultTable : public ::testing::EmptyTestEventListener {
 public:
  // `backends`: this run's backends; `all_backends`: the table's columns.
  ResultTable(std::string dir, std::vector<std::string> backends, std::vector<std::string> all_backends);

  void OnTestPartResult(const ::testing::TestPartResult& result) override;
  void OnTestEnd(const ::testing::TestInfo& info) override;
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override;

  // True if some case skipped without saying "not claimed" (counted as a failure).
  bool unexpected_skips() const { return unexpected_skips_; }

 private:
  struct Outcome {
    std::string status;  // "pass", "FAIL", "not claimed"
    std::string detail;
  };
  void write_results() const;
  void write_table() const;

  std::string dir_;
  std::vector<std::string> backends_;
  std::vector<std::string> all_backends_;
  std::string skip_message_;
  std::string first_failure_;
  bool unexpected_skips_ = false;
  // case -> backend -> outcome
  std::map<std::string, std::map<std::string, Outcome>> results_;
};

}  // namespace dlock::conformance
