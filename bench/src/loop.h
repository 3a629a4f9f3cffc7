// Timing repeated operations.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "clock.h"
#include "stats.h"

namespace dlock_bench {

// Runs `op` `warmup` times untimed, then up to `iterations` times timed, stopping early once
// `cap` has passed (a slow backend cannot stretch the run). Returns one sample per timed call.
// Exceptions from `op` propagate.
template <class Op>
Samples time_loop(int warmup, int iterations, std::chrono::milliseconds cap, Op&& op) {
  for (int i = 0; i < warmup; ++i) op();
  Samples s;
  s.reserve(static_cast<std::size_t>(iterations));
  const std::uint64_t stop_at = mono_ns() + static_cast<std::uint64_t>(cap.count()) * 1'000'000ull;
  for (int i = 0; i < iterations; ++i) {
    std::uint64_t t0 = mono_ns();
    op();
    std::uint64_t t1 = mono_ns();
    s.add(t1 - t0);
    if (t1 > stop_at) break;
  }
  return s;
}

// Times several operations against each other: each is warmed up, then they take turns in
// `rounds` blocks of iterations/rounds calls, so a change of machine load during the run
// hits all of them alike and their ratios stay meaningful. Stops after the round in which
// `cap` x ops.size() has passed. Returns one Timed per op, in order.
struct Timed {
  Samples samples;
  double cpu_s = 0;  // process CPU (user+sys, all threads) while this op's blocks ran
};
std::vector<Timed> time_interleaved(const std::vector<std::function<void()>>& ops, int warmup, int iterations,
                                      std::chrono::milliseconds cap, int rounds = 20);

}  // namespace dlock_bench
