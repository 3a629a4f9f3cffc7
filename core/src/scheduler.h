// The watchdog of one provider: renews leases, enforces max_hold and client-side lease
// ends, and fires the lost signal.
//
// Two threads. The timekeeper never calls the backend: it keeps the deadlines and fires
// lost signals on time even while the network is stalled. The worker makes the blocking
// calls (batched renewals, releases of given-up holds) and reports back.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "dlock/spi/backend.h"
#include "dlock/spi/fork_guard.h"
#include "dlock/spi/held_lock.h"
#include "hold.h"

namespace dlock::detail {

// How long before a lease's estimated end its lost signal fires: 5% of the lease, at least
// 50 ms, at most a quarter of it. The estimate is measured from before the request was
// sent, but the scheduler wakes late and clocks drift (cf. Redlock's 1% + 2 ms).
std::chrono::milliseconds loss_margin(std::chrono::milliseconds lease);

// What the watchdog does with one hold.
struct WatchPlan {
  // Set: extend_many(lease = *renew_lease) every third of it (lease renewal, or a session
  // probe with the backend's default_lease).
  std::optional<std::chrono::milliseconds> renew_lease;
  // The lost signal fires this long before server_expiry() / client_expiry().
  std::chrono::milliseconds server_margin{0};
  std::chrono::milliseconds client_margin{0};
  Clock::time_point max_hold_deadline = Clock::time_point::max();
};

class Scheduler {
 public:
  // Starts both threads. Throws Error(unavailable) when the process cannot start them.
  explicit Scheduler(std::shared_ptr<spi::Backend> backend);
  // Stops both threads (joins them, or detaches the one it runs on: each co-owns what it
  // uses). In a forked child, where the threads do not exist and a mutex may have been held
  // at fork time, it touches nothing and leaks them instead.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Watches `state` as `plan` says. The lost signal fires a margin before the lock's
  // expires_at(); the lock itself lasts until then, when the core releases it on the
  // backend (owner-checked). At max_hold_deadline, or as soon as the backend marks the lock
  // lost, it gives the hold up (lost signal) and releases it on the backend at once.
  void watch(const std::shared_ptr<HoldState>& state, const WatchPlan& plan);
  // Stops renewing `state`, whose lease is now `lease` long (Lease::extend on a lease backend).
  void stop_renewing(HoldState& state, std::chrono::milliseconds lease);
  // A new client-enforced lease of `lease` (Lease::extend on a session backend; probes go on).
  void set_client_lease(HoldState& state, std::chrono::milliseconds lease);
  // `state` was given up (ProviderCore::give_up): release it on the backend at `at`, once no
  // renewal of it is in flight.
  void release_given_up_at(const std::shared_ptr<HoldState>& state, Clock::time_point at);
  // Takes over a release that release_given_up_at scheduled and that has not been queued
  // yet: returns true if there was one (the caller releases now). Called before that
  // schedule exists (the give-up is still on its way), it makes the release run at once.
  bool take_pending_release(HoldState& state);
  // Releases `state` on the backend (owner-checked) on the worker, which keeps it alive
  // until then: a hold given up after its last Lease was dropped. REQUIRES: state->ended.
  void release_dropped(std::shared_ptr<HoldState> state);
  // A release of `lock` (given up or dropped) failed with `unavailable` (a stalled or
  // paused server): try it again on the worker, 50 ms later doubling to 1 s, until it is
  // answered or the lock's expires_at() comes (it ends on its own then). Nothing is kept
  // past the provider. Never blocks on the backend.
  void retry_release(std::shared_ptr<spi::HeldLock> lock);
  // Drops `reference` on the worker (one that may be the provider's last, held by a thread
  // that must not end the provider). `this` may be gone as soon as it returns.
  void dispose(std::shared_ptr<const void> reference) noexcept;
  // Wakes the timekeeper to re-plan (a backend marked a lock lost).
  void poke() noexcept;

  struct Shared;  // what the threads co-own

 private:
  // Stops the threads that were started (joins them, or detaches the one it runs on).
  void stop_threads() noexcept;

  std::shared_ptr<Shared> shared_;
  std::unique_ptr<std::thread> timekeeper_;
  std::unique_ptr<std::thread> worker_;
  // The process that started the threads. A fork generation, not a pid: a grandchild may
  // get the pid of an owner that has exited, and would then join threads it does not have.
  spi::ForkGuard owner_;
};

}  // namespace dlock::detail
