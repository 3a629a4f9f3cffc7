// The harness of section (b)'s native floors: worker processes (forked, no dlock in them)
// hand one lock over for a while, counted exactly as dlock's contenders count (contender.cpp):
// a hand-off is an acquisition right after another worker's release; its latency is the new
// holder's clock minus the stamp the releaser wrote just before releasing.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "stats.h"

namespace dlock_bench {

struct ForkedRegion;  // the memory the workers share with the parent

// What a worker's body calls, in its own process.
class HandoffWorker {
 public:
  HandoffWorker(ForkedRegion& region, int index) : region_(region), index_(index) {}
  // After the worker's set-up (its own connection, file, ...): blocks until the run starts.
  void ready_and_wait_for_start();
  // Right after an acquisition: counts it. Returns true when the run is over: then release
  // and return 0 from the body.
  bool acquired();
  // Right before the release.
  void releasing();
  // True once the run is over (a body blocked with a timeout checks it).
  bool stopped() const;
  // Records why the worker failed (shown by the parent) and exits the process with 1.
  [[noreturn]] void fail(std::uint32_t code);

 private:
  ForkedRegion& region_;
  int index_;
  bool stopping_ = false;
};

struct ForkedHandoffResult {
  double seconds = 0;
  double cpu_s = 0;  // every worker's user+system time over its whole life
  std::uint64_t handoffs = 0;
  std::uint64_t acquisitions = 0;
  std::uint64_t overlaps = 0;  // two workers holding at once: the floor itself is broken
  Samples latency;             // hand-off latencies

  double handoffs_per_s() const { return seconds > 0 ? static_cast<double>(handoffs) / seconds : 0; }
  double acquisitions_per_s() const { return seconds > 0 ? static_cast<double>(acquisitions) / seconds : 0; }
  double cpu_s_per_1000_handoffs() const { return handoffs ? cpu_s / (static_cast<double>(handoffs) / 1000.0) : 0; }
  double cpu_s_per_1000_acquisitions() const {
    return acquisitions ? cpu_s / (static_cast<double>(acquisitions) / 1000.0) : 0;
  }
  // Percentage of acquisitions by the worker that had just released.
  double reacquired_by_releaser_percent() const {
    return acquisitions ? 100.0 * static_cast<double>(acquisitions - handoffs) / static_cast<double>(acquisitions)
                        : 0;
  }
};

struct ForkedHandoffRun {
  int workers = 0;                    // 2..kMaxWorkers
  std::chrono::milliseconds duration;  // from the start, once every worker is ready
  // A worker's whole life after the fork: set up, ready_and_wait_for_start(), then loop
  // acquire / acquired() / releasing() / release. Returns the process's exit code.
  std::function<int(HandoffWorker&, int index)> body;
  // Runs in the parent once every worker is ready, just before the start (e.g. puts the one
  // token in place).
  std::function<void()> on_start;
  // Turns a code a worker passed to fail() into words.
  std::function<std::string(std::uint32_t)> describe_failure;
};

// Forks the workers, runs them, reaps them. Throws std::runtime_error when a worker fails,
// is not ready within 15 s, or exits with an error.
ForkedHandoffResult run_forked_handoff(const ForkedHandoffRun& run);

}  // namespace dlock_bench
