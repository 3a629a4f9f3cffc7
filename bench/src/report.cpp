#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace dlock_bench {

std::string_view to_string(Verdict v) noexcept {
  switch (v) {
    case Verdict::info: return "";
    case Verdict::pass: return "PASS";
    case Verdict::miss: return "MISS";
    case Verdict::fail: return "FAIL";
    case Verdict::na: return "n/a";
  }
  return "";
}

std::string fmt_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_us(double us) {
  if (us >= 100) return fmt_fixed(us, 0);
  if (us >= 10) return fmt_fixed(us, 1);
  if (us >= 1) return fmt_fixed(us, 2);
  return fmt_fixed(us, 3);
}

std::string fmt_count(double n) {
  if (!std::isfinite(n)) return "-";
  auto whole = static_cast<long long>(std::llround(n));
  std::string digits = std::to_string(whole < 0 ? -whole : whole);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return whole < 0 ? "-" + out : out;
}

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Table cells must not break the Markdown row.
std::string cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  return s;
}

}  // namespace

Report::Report(std::string uri_redacted, std::string scheme, bool quick)
    : uri_(std::move(uri_redacted)), scheme_(std::move(scheme)), quick_(quick), started_utc_(utc_now()) {}

void Report::add_error(std::string section, std::string message) {
  errors_.emplace_back(std::move(section), std::move(message));
}

bool Report::has_misses() const noexcept {
  return std::any_of(rows_.begin(), rows_.end(), [](const Row& r) {
    return r.verdict == Verdict::miss || r.verdict == Verdict::fail;
  });
}

void Report::print_markdown(std::ostream& out) const {
  out << "## dlock-bench: " << uri_ << (quick_ ? " (quick)" : "") << ", " << started_utc_ << "\n\n";
  out << "| # | measurement | p50 µs | p99 µs | other | target | measured/target | result |\n";
  out << "|---|---|---:|---:|---|---|---:|---|\n";
  for (const Row& r : rows_) {
    out << "| " << r.section << " | " << cell(r.what) << " | "
        << (r.p50_us ? fmt_us(*r.p50_us) : "") << " | " << (r.p99_us ? fmt_us(*r.p99_us) : "") << " | "
        << cell(r.other) << " | " << cell(r.target) << " | " << cell(r.versus) << " | "
        << to_string(r.verdict) << " |\n";
  }
  for (const auto& n : notes_) out << "\nNote: " << n << "\n";
  for (const auto& [section, message] : errors_) out << "\nERROR (" << section << "): " << message << "\n";
  out.flush();
}

void Report::write_json(std::ostream& out) const {
  out << "{\n  \"uri\": " << json_string(uri_) << ",\n  \"scheme\": " << json_string(scheme_)
      << ",\n  \"quick\": " << (quick_ ? "true" : "false") << ",\n  \"started_utc\": "
      << json_string(started_utc_) << ",\n  \"rows\": [";
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    out << (i ? ",\n" : "\n") << "    {\"section\": " << json_string(r.section)
        << ", \"what\": " << json_string(r.what);
    if (r.p50_us) out << ", \"p50_us\": " << json_number(*r.p50_us);
    if (r.p99_us) out << ", \"p99_us\": " << json_number(*r.p99_us);
    if (!r.target.empty()) out << ", \"target\": " << json_string(r.target);
    if (!r.versus.empty()) out << ", \"versus\": " << json_string(r.versus);
    out << ", \"result\": " << json_string(to_string(r.verdict)) << ", \"metrics\": {";
    for (std::size_t m = 0; m < r.metrics.size(); ++m) {
      out << (m ? ", " : "") << json_string(r.metrics[m].first) << ": " << json_number(r.metrics[m].second);
    }
    out << "}}";
  }
  out << "\n  ],\n  \"notes\": [";
  for (std::size_t i = 0; i < notes_.size(); ++i) out << (i ? ", " : "") << json_string(notes_[i]);
  out << "],\n  \"errors\": [";
  for (std::size_t i = 0; i < errors_.size(); ++i) {
    out << (i ? ", " : "") << "{\"section\": " << json_string(errors_[i].first)
        << ", \"message\": " << json_string(errors_[i].second) << "}";
  }
  out << "]\n}\n";
}

void add_native_handoff_rows(Report& report, std::string floor_what, double native, double at_least) {
  Row n;
  n.section = "b";
  n.what = std::move(floor_what);
  n.other = fmt_count(native) + " handoffs/s";
  n.metrics = {{"handoffs_per_s", native}};
  report.add(std::move(n));
  auto dlock_rate = report.metric_of("handoffs per second", "handoffs_per_s");
  if (!dlock_rate) return;
  Row r;
  r.section = "b";
  r.what = "dlock handoffs/s against the native floor";
  const double ratio = native > 0 ? *dlock_rate / native : 0;
  r.other = fmt_count(*dlock_rate) + " vs " + fmt_count(native) + " handoffs/s";
  r.target = ">= " + fmt_fixed(at_least, 1) + " x native floor";
  r.versus = fmt_fixed(ratio, 2) + " x";
  r.verdict = ratio >= at_least ? Verdict::pass : Verdict::miss;
  r.metrics = {{"ratio_to_native", ratio}};
  report.add(std::move(r));
}

void add_speedup_row(Report& report, std::string_view peer_what, std::string_view peer_name, double at_least) {
  auto dlock_p50 = report.metric_of("dlock try_lock + release", "p50_us");
  auto peer_p50 = report.metric_of(peer_what, "p50_us");
  if (!dlock_p50 || !peer_p50 || *dlock_p50 <= 0) return;
  Row r;
  r.section = "a";
  r.what = "dlock against " + std::string(peer_name) + " (uncontended p50)";
  const double ratio = *peer_p50 / *dlock_p50;
  r.target = ">= " + fmt_fixed(at_least, 0) + " x faster than " + std::string(peer_name);
  r.versus = fmt_fixed(ratio, 1) + " x faster";
  r.verdict = ratio >= at_least ? Verdict::pass : Verdict::miss;
  r.metrics = {{"speedup_vs_" + std::string(peer_name), ratio}};
  report.add(std::move(r));
}

}  // namespace dlock_bench
