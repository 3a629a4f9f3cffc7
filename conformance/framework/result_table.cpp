#include "framework/result_table.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

namespace dlock::conformance {
namespace {

// "Conformance/Exclusion.BetweenThreads/mem" -> {"Exclusion.BetweenThreads", "mem"}.
std::pair<std::string, std::string> split_name(const ::testing::TestInfo& info) {
  std::string suite = info.test_suite_name();
  if (const auto slash = suite.find('/'); slash != std::string::npos) suite.erase(0, slash + 1);
  std::string test = info.name();
  std::string backend = "*";
  if (const auto slash = test.rfind('/'); slash != std::string::npos) {
    backend = test.substr(slash + 1);
    test.erase(slash);
  }
  return {suite + "." + test, backend};
}

// The last non-empty line of a gtest message: the case's own words, after gtest's
// "Expected: ... actual: ..." lines.
std::string last_line(const std::string& text) {
  std::string line, last;
  for (const char c : text + "\n") {
    if (c == '\n') {
      if (!line.empty()) last = line;
      line.clear();
    } else {
      line.push_back(c);
    }
  }
  return last;
}

std::string one_line(std::string text, std::size_t max = 200) {
  for (auto& c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == '|') c = ' ';
  }
  if (text.size() > max) text = text.substr(0, max) + "...";
  return text;
}

}  // namespace

ResultTable::ResultTable(std::string dir, std::vector<std::string> backends,
                         std::vector<std::string> all_backends)
    : dir_(std::move(dir)), backends_(std::move(backends)), all_backends_(std::move(all_backends)) {}

void ResultTable::OnTestPartResult(const ::testing::TestPartResult& result) {
  if (result.skipped()) {
    skip_message_ = result.message();
  } else if (result.failed() && first_failure_.empty()) {
    first_failure_ = result.message();
  }
}

void ResultTable::OnTestEnd(const ::testing::TestInfo& info) {
  auto [name, backend] = split_name(info);
  Outcome o;
  const auto* r = info.result();
  if (r->Failed()) {
    o = {"FAIL", one_line(last_line(first_failure_))};
  } else if (r->Skipped()) {
    if (skip_message_.rfind(kNotClaimed, 0) == 0) {
      o = {"not claimed", one_line(skip_message_.substr(std::string(kNotClaimed).size()))};
    } else {
      o = {"FAIL", "skipped without a claim: " + one_line(skip_message_)};
      unexpected_skips_ = true;
      std::cout << "[conformance] FAIL: " << name << "/" << backend
                << " skipped, and a skip is only allowed for a capability not claimed\n";
    }
  } else {
    o = {"pass", ""};
  }
  if (backend == "*") {  // a backend-independent check: it counts for every backend of the run
    for (const auto& b : backends_) results_[name][b] = o;
  } else {
    results_[name][backend] = o;
  }
  skip_message_.clear();
  first_failure_.clear();
}

void ResultTable::OnTestProgramEnd(const ::testing::UnitTest&) {
  if (::testing::GTEST_FLAG(filter) != "*") {
    // A partial run must not overwrite the full results: print its own outcomes only.
    std::cout << "\n[conformance] filtered run: results and table not written\n";
    for (const auto& [name, by_backend] : results_) {
      for (const auto& [b, o] : by_backend) {
        std::cout << "  " << name << " / " << b << ": " << o.status
                  << (o.detail.empty() ? "" : " (" + o.detail + ")") << "\n";
      }
    }
    return;
  }
  try {
    write_results();
    write_table();
  } catch (const std::exception& e) {
    std::cout << "[conformance] could not write the table: " << e.what() << "\n";
  }
}

void ResultTable::write_results() const {
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(dir_) / "results");
  for (const auto& b : backends_) {
    std::ofstream out(fs::path(dir_) / "results" / (b + ".tsv"), std::ios::trunc);
    for (const auto& [name, by_backend] : results_) {
      if (const auto it = by_backend.find(b); it != by_backend.end()) {
        out << name << '\t' << it->second.status << '\t' << it->second.detail << '\n';
      }
    }
  }
}

void ResultTable::write_table() const {
  namespace fs = std::filesystem;
  std::map<std::string, std::map<std::string, std::string>> table;  // case -> backend -> status
  std::map<std::string, std::string> failures;  // "case on backend" -> detail
  std::set<std::string> have;
  for (const auto& b : all_backends_) {
    std::ifstream in(fs::path(dir_) / "results" / (b + ".tsv"));
    if (!in) continue;
    have.insert(b);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string name, status, detail;
      std::getline(fields, name, '\t');
      std::getline(fields, status, '\t');
      std::getline(fields, detail);
      table[name][b] = status;
      if (status == "FAIL") failures[name + " on " + b] = detail;
    }
  }
  std::ostringstream md;
  md << "# dlock conformance\n\n| case |";
  for (const auto& b : all_backends_) md << ' ' << b << " |";
  md << "\n|---|";
  for (std::size_t i = 0; i < all_backends_.size(); ++i) md << "---|";
  md << '\n';
  std::map<std::string, int> passes, fails;
  for (const auto& [name, by_backend] : table) {
    md << "| " << name << " |";
    for (const auto& b : all_backends_) {
      const auto it = by_backend.find(b);
      const std::string s = it == by_backend.end() ? (have.count(b) ? "—" : "not run") : it->second;
      if (s == "pass") ++passes[b];
      if (s == "FAIL") ++fails[b];
      md << ' ' << s << " |";
    }
    md << '\n';
  }
  md << "| **total** |";
  for (const auto& b : all_backends_) {
    if (have.count(b)) {
      md << ' ' << passes[b] << " pass, " << fails[b] << " FAIL |";
    } else {
      md << " not run |";
    }
  }
  md << "\n";
  if (!failures.empty()) {
    md << "\n## Failures (first message of each)\n\n";
    for (const auto& [where, detail] : failures) md << "- " << where << ": " << detail << '\n';
  }
  const auto path = fs::path(dir_) / "conformance-table.md";
  std::ofstream(path, std::ios::trunc) << md.str();
  std::cout << "\n" << md.str() << "\n[conformance] table written to " << path.string() << "\n";
}

}  // namespace dlock::conformance
