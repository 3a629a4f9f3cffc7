// The results of one run: rows printed as a Markdown table and written as JSON.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock_bench {

// What a row says about its target. info: no target applies (the figure is for reading).
enum class Verdict { info, pass, miss, fail, na };

std::string_view to_string(Verdict v) noexcept;

struct Row {
  std::string section;               // "a", "b", "c", "d"
  std::string what;                  // what was measured
  std::optional<double> p50_us;      // latency percentiles, if this row is a latency
  std::optional<double> p99_us;
  std::string other;                 // further figures, human-readable ("12,345 handoffs/s")
  std::string target;                // the target in words ("p50 <= 1.10 x floor p50"), or ""
  std::string versus;                // measured against the target ("1.04 x"), or ""
  Verdict verdict = Verdict::info;
  std::vector<std::pair<std::string, double>> metrics;  // every figure, for JSON

  // The figure named `key` in metrics, if any.
  std::optional<double> find(std::string_view key) const {
    for (const auto& [k, v] : metrics) {
      if (k == key) return v;
    }
    return std::nullopt;
  }
  // The figure named `key` in metrics, or `fallback`.
  double metric(std::string_view key, double fallback = -1) const { return find(key).value_or(fallback); }
};

// Thread safety: not synchronized; one Report per run, filled by one thread.
class Report {
 public:
  Report(std::string uri_redacted, std::string scheme, bool quick);

  void add(Row row) { rows_.push_back(std::move(row)); }
  // A section that could not be measured; printed under the table, makes the exit code 1.
  void add_error(std::string section, std::string message);
  // A remark printed under the table (e.g. which fallback was used).
  void add_note(std::string note) { notes_.push_back(std::move(note)); }

  bool has_errors() const noexcept { return !errors_.empty(); }
  const std::vector<Row>& rows() const noexcept { return rows_; }
  bool has_misses() const noexcept;
  // The figure `key` of the first row whose `what` starts with `what_prefix`, if any.
  std::optional<double> metric_of(std::string_view what_prefix, std::string_view key) const {
    for (const auto& row : rows_) {
      if (!row.what.starts_with(what_prefix)) continue;
      if (auto v = row.find(key)) return v;
    }
    return std::nullopt;
  }

  void print_markdown(std::ostream& out) const;
  void write_json(std::ostream& out) const;

 private:
  std::string uri_;
  std::string scheme_;
  bool quick_;
  std::string started_utc_;
  std::vector<Row> rows_;
  std::vector<std::pair<std::string, std::string>> errors_;
  std::vector<std::string> notes_;
};

// Adds the row `floor_what` (a native hand-off floor: `native` handoffs/s), then "dlock
// handoffs/s against the native floor" with a target of `at_least` times the floor, when
// the run has dlock's "handoffs per second" row.
void add_native_handoff_rows(Report& report, std::string floor_what, double native, double at_least);

// Adds "dlock against <peer> (uncontended p50)": the p50 of the row starting with
// `peer_what` over dlock's try_lock + release p50, with a target of `at_least` times faster.
// Adds nothing when either row is missing.
void add_speedup_row(Report& report, std::string_view peer_what, std::string_view peer_name, double at_least);

// "12.3", "1,234", for tables.
std::string fmt_us(double us);
std::string fmt_count(double n);
std::string fmt_fixed(double v, int decimals);

}  // namespace dlock_bench
