// The watchdog: one thread per provider that renews leases, enforces max_hold and
// client-side lease ends, and fires the lost signal.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "dlock/spi/backend.h"
#include "hold.h"

namespace dlock::detail {

class Scheduler {
 public:
  explicit Scheduler(std::shared_ptr<spi::Backend> backend);
  // Stops the thread (joins it, or detaches when called on it: the thread co-owns what it
  // uses). In a forked child, where the thread does not exist and its mutex may have been
  // held at fork time, it touches neither and leaks them instead.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Watches `state`: renews it every renew_lease/3 when renew_lease is set; at
  // max_hold_deadline, or when the lock's expires_at() passes without renewal, ends it:
  // fires the lost signal and releases it on the backend (owner-checked, best effort).
  void watch(const std::shared_ptr<HoldState>& state, std::optional<std::chrono::milliseconds> renew_lease,
             Clock::time_point max_hold_deadline);
  // Stops renewing `state` (after Lease::extend); deadlines still apply.
  void stop_renewing(HoldState& state);

  struct Shared;  // what the thread co-owns

 private:
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<std::thread> thread_;
  int owner_pid_;  // the process that started thread_
};

// Ends a hold the core gives up on: fires the lost signal, then releases it on the backend
// (owner-checked; a failure is ignored: the lease expires or the session ends anyway).
void end_hold(HoldState& state) noexcept;

}  // namespace dlock::detail
