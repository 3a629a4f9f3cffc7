// Reply: the answer to one asynchronous ZooKeeper request, which the session's driver thread
// fills (driver.h) and the caller waits for with its own deadline.
//
// The wait is a futex on one word, not a mutex and a condition variable: every lock
// operation waits for at least one reply, and with glibc's condition variable an
// uncontended acquire + release took about 9 µs longer (two replies; measured against the
// raw client's synchronous calls, which this wait now matches).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <utility>

namespace dlock::zookeeper {

// A flag set once, which any number of threads may wait for until a deadline.
class OneShotFlag {
 public:
  using Clock = std::chrono::steady_clock;

  // Sets the flag and wakes every waiter. Writes made before it are seen by a waiter that
  // sees the flag set.
  void set() noexcept;
  bool is_set() const noexcept { return state_.load(std::memory_order_acquire) == kSet; }
  // True once the flag is set; false if `deadline` (steady clock: a wall-clock step does
  // not move it) passes first. A deadline already past only reads the flag.
  bool wait_until(Clock::time_point deadline) noexcept;

 private:
  static constexpr int kUnset = 0;
  static constexpr int kWaitedFor = 1;  // unset, and someone may sleep on it
  static constexpr int kSet = 2;
  std::atomic<int> state_{kUnset};
};

template <class T>
class Reply {
 public:
  using Clock = OneShotFlag::Clock;

  // Stores the answer and wakes the waiters. Called once per request: by its completion,
  // or by the request itself when the client refused to send it.
  void set(T value) {
    value_ = std::move(value);
    done_.set();
  }
  // The answer, or nullopt if none came by `deadline`.
  std::optional<T> wait_until(Clock::time_point deadline) {
    if (!done_.wait_until(deadline)) return std::nullopt;
    return value_;
  }

 private:
  std::optional<T> value_;  // written once, before done_ is set; read only after it is
  OneShotFlag done_;
};

}  // namespace dlock::zookeeper
