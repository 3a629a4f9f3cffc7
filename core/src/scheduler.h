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
#include "hold.h"

namespace dlock::detail {

// How long before a lease's estimated end its lost signal fires: 5% of the lease, at least
// 5 ms, at most a quarter of it. The estimate is measured from before the request was
// sent, but the scheduler wakes late and clocks drift (cf. Redlock's 1% + 2 ms).
std::chrono::milliseconds loss_margin(std::chrono::milliseconds lease);

class Scheduler {
 public:
  explicit Scheduler(std::shared_ptr<spi::Backend> backend);
  // Stops both threads (joins them, or detaches the one it runs on: each co-owns what it
  // uses). In a forked child, where the threads do not exist and a mutex may have been held
  // at fork time, it touches nothing and leaks them instead.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Watches `state`, whose lease is `lease` long: renews it every renew_lease/3 when
  // renew_lease is set. At max_hold_deadline it gives it up (lost signal, then an
  // owner-checked release). loss_margin(lease) before its expires_at() it fires the lost
  // signal; the lock itself lasts its lease (the server expires a lease-based lock; a
  // session lock is released at expires_at()).
  void watch(const std::shared_ptr<HoldState>& state, std::optional<std::chrono::milliseconds> renew_lease,
             std::chrono::milliseconds lease, Clock::time_point max_hold_deadline);
  // Stops renewing `state`, whose lease is now `lease` long (after Lease::extend).
  void stop_renewing(HoldState& state, std::chrono::milliseconds lease);

  struct Shared;  // what the threads co-own

 private:
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<std::thread> timekeeper_;
  std::unique_ptr<std::thread> worker_;
  int owner_pid_;  // the process that started the threads
};

}  // namespace dlock::detail
