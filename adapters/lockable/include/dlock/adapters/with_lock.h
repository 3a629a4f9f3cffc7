// dlock::with_lock: run a piece of work under a lock, declaratively — the C++ counterpart of
// Spring's @DistributedLock(resourceKey, leaseTime, waitTime) / Redisson's lock-then-run.
//
//   int left = dlock::with_lock(*provider, {.key = "order:" + id, .lease = 10s,
//                                           .wait = dlock::Wait::for_duration(2s)},
//                               [&](const dlock::Lease& l) { return deduct(stock, l.fencing_token()); });
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>

#include "dlock/lease.h"
#include "dlock/options.h"
#include "dlock/provider.h"
#include "dlock/wait.h"

namespace dlock {

// What with_lock locks and how. Fields in the order designated initializers need.
struct LockSpec {
  std::string key;                                    // the lock's name (1..max_name_bytes)
  std::optional<std::chrono::milliseconds> lease;     // empty: default lease, watchdog-renewed
  Wait wait = Wait::forever();                        // Wait::try_once(), for_duration(d), until(t)
  std::optional<std::chrono::milliseconds> max_hold;  // empty: no limit
  LockMode mode = LockMode::exclusive;
  std::optional<std::string> owner;                   // empty: the calling thread
  std::stop_token cancel;                             // cancels the wait
};

namespace detail {
// Acquires as `spec` says; throws Error(timed_out) / Error(cancelled) / what acquire throws.
Lease acquire_spec(ILockProvider& provider, const LockSpec& spec);
// Releases after the work ran. Throws Error(lock_lost) if the lock was lost meanwhile.
// A release the backend cannot perform (unavailable) is not reported: the lock then ends
// by itself with its lease or session.
void finish_spec(Lease& lease);
}  // namespace detail

// Acquires spec.key, runs `work` — with the Lease (`work(const Lease&)`) or without
// (`work()`) — releases, and returns what `work` returned.
// Throws Error(timed_out) if the lock was not acquired within spec.wait, Error(cancelled)
// if spec.cancel fired while waiting, what ILockProvider::acquire throws (invalid_argument,
// unsupported, unavailable), and Error(lock_lost) if the lock was lost before `work`
// returned (its result is then discarded: it ran without the guarantee; watch
// Lease::lost_token() inside long work). If `work` throws, the lock is released and the
// exception propagates unchanged.
template <class Work>
decltype(auto) with_lock(ILockProvider& provider, const LockSpec& spec, Work&& work) {
  Lease lease = detail::acquire_spec(provider, spec);
  auto run = [&]() -> decltype(auto) {
    if constexpr (std::is_invocable_v<Work&, const Lease&>) {
      return std::invoke(work, std::as_const(lease));
    } else {
      return std::invoke(work);
    }
  };
  using Result = decltype(run());
  if constexpr (std::is_void_v<Result>) {
    run();
    detail::finish_spec(lease);
  } else {
    Result result = run();
    detail::finish_spec(lease);
    return result;  // decltype(result) is Result: by value (moved) or by reference
  }
}

}  // namespace dlock
