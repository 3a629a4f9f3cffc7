#include "stats.h"

#include <algorithm>
#include <cmath>

namespace dlock_bench {

double Samples::percentile_us(double p) {
  if (!sorted_) {
    std::sort(ns_.begin(), ns_.end());
    sorted_ = true;
  }
  p = std::clamp(p, 0.0, 100.0);
  // Nearest rank: the smallest sample with at least p% of the samples at or below it.
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(ns_.size())));
  std::size_t index = rank == 0 ? 0 : rank - 1;
  return static_cast<double>(ns_[std::min(index, ns_.size() - 1)]) / 1000.0;
}

}  // namespace dlock_bench
