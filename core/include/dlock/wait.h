// How long an acquire may wait. Built only through the named factories below: there is no
// magic "0 = forever"; the infinite wait has its own name.
#pragma once

#include <chrono>

namespace dlock {

class Wait {
 public:
  using Clock = std::chrono::steady_clock;

  // One attempt, no waiting.
  static Wait try_once() noexcept { return Wait(Kind::once, {}, {}); }
  // Wait at most `d`, counted from the start of the acquire call. A zero or negative
  // duration means try once.
  static Wait for_duration(Clock::duration d) noexcept { return Wait(Kind::duration, d, {}); }
  // Wait until `deadline` (steady clock). A deadline in the past means try once.
  static Wait until(Clock::time_point deadline) noexcept { return Wait(Kind::deadline, {}, deadline); }
  // Wait as long as it takes (cancellation still ends it: see AcquireOptions::cancel).
  static Wait forever() noexcept { return Wait(Kind::infinite, {}, {}); }

  bool is_forever() const noexcept { return kind_ == Kind::infinite; }

  // The absolute deadline for an acquire starting at `start`; Clock::time_point::max()
  // for forever, `start` (or earlier) for try-once.
  Clock::time_point deadline_from(Clock::time_point start) const noexcept {
    switch (kind_) {
      case Kind::once: return start;
      case Kind::duration:
        if (d_ <= Clock::duration::zero()) return start;
        // Saturates: a wait too long for the clock is a wait forever, not a wrapped deadline.
        return d_ >= Clock::time_point::max() - start ? Clock::time_point::max() : start + d_;
      case Kind::deadline: return deadline_;
      case Kind::infinite: break;
    }
    return Clock::time_point::max();
  }

 private:
  enum class Kind { once, duration, deadline, infinite };
  Wait(Kind k, Clock::duration d, Clock::time_point t) noexcept : kind_(k), d_(d), deadline_(t) {}

  Kind kind_;
  Clock::duration d_;
  Clock::time_point deadline_;
};

}  // namespace dlock
