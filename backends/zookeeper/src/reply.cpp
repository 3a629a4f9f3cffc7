#include "reply.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace dlock::zookeeper {
namespace {

long futex(std::atomic<int>* word, int op, int value, const timespec* timeout, int mask) noexcept {
  return ::syscall(SYS_futex, reinterpret_cast<int*>(word), op, value, timeout, nullptr, mask);
}

// steady_clock is CLOCK_MONOTONIC, the clock FUTEX_WAIT_BITSET measures absolute timeouts
// on (without FUTEX_CLOCK_REALTIME).
timespec monotonic(OneShotFlag::Clock::time_point t) noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  if (ns <= 0) return timespec{0, 0};
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

}  // namespace

void OneShotFlag::set() noexcept {
  if (state_.exchange(kSet, std::memory_order_acq_rel) == kWaitedFor) {
    futex(&state_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, 0);
  }
}

bool OneShotFlag::wait_until(Clock::time_point deadline) noexcept {
  if (is_set()) return true;
  if (deadline <= Clock::now()) return false;
  const timespec until = monotonic(deadline);
  int seen = state_.load(std::memory_order_acquire);
  while (seen != kSet) {
    // Say that someone sleeps, so that set() wakes us (it makes no system call otherwise).
    if (seen == kUnset &&
        !state_.compare_exchange_weak(seen, kWaitedFor, std::memory_order_acq_rel, std::memory_order_acquire)) {
      continue;  // `seen` now holds the current state
    }
    const long rc = futex(&state_, FUTEX_WAIT_BITSET_PRIVATE, kWaitedFor, &until, FUTEX_BITSET_MATCH_ANY);
    if (rc != 0 && errno == ETIMEDOUT) return is_set();
    // Woken, interrupted, or the state was no longer kWaitedFor: look again.
    seen = state_.load(std::memory_order_acquire);
  }
  return true;
}

}  // namespace dlock::zookeeper
