// Latency samples and their percentiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlock_bench {

// A set of latencies in nanoseconds. Not thread-safe.
class Samples {
 public:
  void reserve(std::size_t n) { ns_.reserve(n); }
  void add(std::uint64_t ns) { ns_.push_back(ns); sorted_ = false; }
  std::size_t size() const noexcept { return ns_.size(); }
  bool empty() const noexcept { return ns_.empty(); }

  // Nearest-rank percentile, p in [0, 100], in microseconds. REQUIRES: !empty().
  double percentile_us(double p);
  double p50_us() { return percentile_us(50); }
  double p99_us() { return percentile_us(99); }

 private:
  std::vector<std::uint64_t> ns_;
  bool sorted_ = true;
};

}  // namespace dlock_bench
