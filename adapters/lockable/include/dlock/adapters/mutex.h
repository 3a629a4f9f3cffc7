// dlock::Mutex and dlock::SharedMutex: a distributed lock behind the std Lockable,
// TimedLockable and SharedTimedLockable interfaces, so std::lock_guard, std::unique_lock,
// std::scoped_lock and std::shared_lock work with it.
//
//   auto provider = dlock::open("redis://127.0.0.1:6379");
//   dlock::Mutex m(provider, "nightly-report");
//   if (std::unique_lock lk(m, std::chrono::seconds(2)); lk.owns_lock()) { … m.fencing_token() … }
//
// State machine (per object): unlocked --lock()/try_lock…() succeeds--> locked (one Lease)
// --unlock()--> unlocked. The distributed owner is the locking thread (as std::timed_mutex),
// so two threads of one process exclude each other exactly as two processes do. A lock lost
// while locked (lease expired, key deleted) can be granted to another thread before the
// lost one is unlocked: Mutex then keeps one hold per lock() not yet unlocked, and each
// unlock() ends exactly one of them (see "Lost and re-granted" at Mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <vector>

#include "dlock/lease.h"
#include "dlock/options.h"
#include "dlock/provider.h"
#include "dlock/wait.h"

namespace dlock {

namespace detail {
// Waits longer than this (~30 years) are waits forever, so max() never overflows the clock.
inline constexpr std::chrono::duration<long double> longest_wait = std::chrono::hours(24 * 365 * 30);

// A std duration as a Wait: zero, negative or NaN means try once; beyond longest_wait
// (max(), infinity), forever. Compared in long double before any conversion, so no
// representation or unit can overflow and wrap (hours::max() in nanoseconds would).
template <class Rep, class Period>
Wait wait_for(const std::chrono::duration<Rep, Period>& d) {
  const std::chrono::duration<long double> left(d);
  if (!(left > left.zero())) return Wait::try_once();
  if (left > longest_wait) return Wait::forever();
  return Wait::for_duration(std::chrono::ceil<Wait::Clock::duration>(d));  // in range: exact
}
// A deadline on any clock and unit as a Wait, saturating as wait_for: the time left is
// computed in long double (t - Clock::now() in the clock's own type overflows for min(),
// max() and coarse units), so a past deadline is one attempt and a deadline beyond
// longest_wait is forever. A steady_clock deadline in range is kept exactly; other clocks
// are converted through "time left now".
template <class Clock, class Duration>
Wait wait_until(const std::chrono::time_point<Clock, Duration>& t) {
  const auto now = Clock::now();
  const std::chrono::duration<long double> left = std::chrono::duration<long double>(t.time_since_epoch()) -
                                                  std::chrono::duration<long double>(now.time_since_epoch());
  if (!(left > left.zero())) return Wait::try_once();
  if (left > longest_wait) return Wait::forever();
  if constexpr (std::is_same_v<Clock, Wait::Clock>) {
    return Wait::until(std::chrono::ceil<Wait::Clock::duration>(t));  // near now: cannot overflow
  } else {
    return wait_for(left);
  }
}
}  // namespace detail

// An exclusive distributed lock on `name`, usable as a std TimedLockable.
// Thread safety: all methods may be called from any thread. Not recursive: lock() by the
// thread that holds it (even a hold since lost, until it is unlocked) throws
// Error(would_deadlock) instead of deadlocking. unlock() may be called from any thread (the
// hold is released for whoever locked it).
// Lost and re-granted: when a hold is lost and another thread is granted this Mutex before
// the lost hold's lock() is unlocked, both lock()s are outstanding, and each unlock() ends
// exactly one: the calling thread's own if it has one, otherwise the oldest. So the unlock()
// that pairs with a lost hold never releases the newer hold (no double grant); an unlock()
// handed to a third thread for the newer hold ends the lost one instead, and the newer hold
// is released by the next unlock(): later, never earlier than its own unlock. The hold an
// unlock() from the calling thread would end is also what fencing_token() and lost_token()
// report, so a thread whose hold was lost sees its own old token and fired signal, never
// the next holder's.
// Two Mutex objects of one name exclude each other across threads; locked by one thread,
// the second is a re-entry of the first (granted at once where the provider is reentrant).
// "This thread" is never a later thread that inherited an exited locker's std::thread::id:
// that one is another owner (try_lock() false, not would_deadlock).
// Every acquire throws what ILockProvider::acquire throws (invalid_argument, unavailable, …).
class Mutex {
 public:
  // Locks `name` through `provider` with `options` (lease, max_hold, fair, cancel) for each
  // acquisition. Throws Error(invalid_argument) if provider is null or options.owner is
  // set (the owner is always the locking thread).
  Mutex(std::shared_ptr<ILockProvider> provider, std::string name, AcquireOptions options = {});
  // Releases every hold not unlocked (lost ones included), best effort; never throws.
  ~Mutex();
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until locked. Throws Error(cancelled) if options.cancel fires while waiting,
  // Error(would_deadlock) if the calling thread already holds this Mutex.
  void lock();
  // One attempt, no waiting. True if locked.
  [[nodiscard]] bool try_lock();
  // Waits at most `d` (zero or negative: one attempt; beyond ~30 years, max(): forever).
  // True if locked.
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return acquire(detail::wait_for(d));
  }
  // Waits until `t`, on any clock (a past deadline, min(): one attempt; one beyond ~30
  // years, max(): forever). True if locked.
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return acquire(detail::wait_until(t));
  }
  // Ends one outstanding lock() and releases its hold: the calling thread's own, else the
  // oldest (see "Lost and re-granted" above). Never throws (std::unique_lock calls it from
  // its destructor): a hold that cannot be released (server down) ends by itself with its
  // lease or session. Does nothing when not locked. Check lost_token() before unlocking to
  // learn whether the lock was still held.
  void unlock() noexcept;

  // While locked: the fencing token of the hold an unlock() from this thread would end
  // (0 when unlocked).
  std::uint64_t fencing_token() const;
  // While locked: fires when that hold may no longer be held (a never-firing token when
  // unlocked). Long work under the lock should watch it.
  std::stop_token lost_token() const;
  const std::string& name() const noexcept { return name_; }

 private:
  friend class SharedMutex;  // takes its shared holds with the same provider and options
  // One lock() not yet unlocked.
  struct Held {
    // The locking thread, by a per-process counter (never std::thread::id, which a later
    // thread inherits once the locker exits).
    std::uint64_t locker;
    Lease lease;
  };
  bool acquire(Wait wait);
  // The hold an unlock() from thread `self` ends; null when unlocked. mu_ must be held.
  const Held* paired_with(std::uint64_t self) const;

  std::shared_ptr<ILockProvider> provider_;
  std::string name_;
  AcquireOptions options_;
  mutable std::mutex mu_;  // guards current_ and superseded_, never held while waiting
  std::optional<Held> current_;  // the newest hold
  // Holds lost and then replaced by a newer grant, whose lock() is not unlocked yet, oldest
  // first. Kept (not released) so their locker still sees its own token and lost signal.
  std::vector<Held> superseded_;
};

// A read-write distributed lock on `name`: exclusive holds as Mutex, plus shared holds for
// std::shared_lock (many threads/processes read, one writes). Needs a provider with
// Capabilities::read_write; otherwise the shared calls throw Error(unsupported).
// Thread safety: all methods may be called from any thread; unlock_shared() must be called
// by the thread that took the shared hold. Neither mode is recursive, and a thread reading
// that asks to write is refused (an upgrade): both throw Error(would_deadlock).
class SharedMutex {
 public:
  // As Mutex's constructor.
  SharedMutex(std::shared_ptr<ILockProvider> provider, std::string name, AcquireOptions options = {});
  // Releases holds still held, best effort; never throws.
  ~SharedMutex();
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // Exclusive holds: as Mutex.
  void lock() { exclusive_.lock(); }
  [[nodiscard]] bool try_lock() { return exclusive_.try_lock(); }
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return exclusive_.try_lock_for(d);
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return exclusive_.try_lock_until(t);
  }
  void unlock() noexcept { exclusive_.unlock(); }

  // Shared holds, one per thread: same contracts as the exclusive calls. Asking for shared
  // while this thread holds it shared throws Error(would_deadlock).
  void lock_shared();
  [[nodiscard]] bool try_lock_shared();
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return acquire_shared(detail::wait_for(d));
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    return acquire_shared(detail::wait_until(t));
  }
  // Releases the calling thread's shared hold; never throws; does nothing if it has none.
  void unlock_shared() noexcept;

  // The calling thread's shared hold's fencing token (even once lost), else the exclusive
  // hold's (as Mutex::fencing_token), else 0.
  std::uint64_t fencing_token() const;
  const std::string& name() const noexcept { return exclusive_.name(); }

 private:
  bool acquire_shared(Wait wait);

  Mutex exclusive_;
  mutable std::mutex mu_;  // guards shared_
  std::map<std::uint64_t, Lease> shared_;  // by reading thread, numbered as Mutex::holder_
};

}  // namespace dlock
