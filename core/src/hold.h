// The core's bookkeeping of held locks. Private to the core.
//
// One HoldState per (name, owner) lock held through a provider: the backend's HeldLock, the
// count of re-entrant holds, and the watchdog's schedule. One Hold per Lease: which mode the
// Lease asked for and whether it was released. Holds keep their HoldState alive; a
// HoldState keeps its ProviderCore (backend, watchdog) alive.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/options.h"
#include "dlock/spi/fork_guard.h"
#include "dlock/spi/held_lock.h"

namespace dlock::detail {

class ProviderCore;
using Clock = std::chrono::steady_clock;

struct HoldState {
  std::shared_ptr<ProviderCore> core;
  std::shared_ptr<spi::HeldLock> lock;
  std::string owner;
  // The process that took it (spi::fork_generation() then): a forked child's copy of the
  // state is not a hold of the child's.
  std::uint64_t fork_generation = 0;
  bool in_taking_process() const noexcept { return fork_generation == spi::fork_generation(); }
  // Guarded by ProviderCore::mu_:
  int holds = 0;           // live Holds (re-entrant count)
  bool releasing = false;  // the last Hold is releasing it on the backend
  // Released, or given up by the core (max hold, client lease, lost). Written under
  // ProviderCore::mu_; read by the scheduler without it, hence atomic.
  std::atomic<bool> ended{false};
  // Pokes the watchdog when the backend marks the lock lost (SessionHolds, a session event).
  std::unique_ptr<std::stop_callback<std::function<void()>>> on_backend_loss;
  // The watchdog's plan for this lock, guarded by the Scheduler's mutex.
  // Set: renewed (lease backends) or probed (session backends) every third of it.
  std::optional<std::chrono::milliseconds> renew_lease;
  // How long before server_expiry() / client_expiry() the lost signal fires. Written under
  // the Scheduler's mutex; atomic for Lease::held(), which reads them without it.
  std::atomic<std::chrono::milliseconds> server_margin{std::chrono::milliseconds(0)};
  std::atomic<std::chrono::milliseconds> client_margin{std::chrono::milliseconds(0)};
  // When the holder is told the lock is lost if nothing renews it first: a margin before
  // whichever expiry comes first (time_point::max() when neither has an end).
  Clock::time_point loss_deadline() const noexcept {
    auto minus = [](Clock::time_point t, std::chrono::milliseconds m) {
      return t == Clock::time_point::max() ? t : t - m;
    };
    return std::min(minus(lock->server_expiry(), server_margin.load()),
                    minus(lock->client_expiry(), client_margin.load()));
  }
  Clock::time_point next_renew = Clock::time_point::max();
  Clock::time_point max_hold_deadline = Clock::time_point::max();
  bool renewing = false;  // a renewal of it is in flight on the worker thread
  bool watched = false;   // in the scheduler's entries
  // Given up by the core: the backend's owner-checked release runs at this time (once no
  // renewal is in flight); max() when none is pending.
  Clock::time_point release_at = Clock::time_point::max();
  bool cleaned = false;  // the release after give-up has been queued
  bool release_asked = false;  // the holder dropped it before the give-up planned its release
};

class Hold {
 public:
  Hold(std::shared_ptr<HoldState> state, LockMode mode) : state_(std::move(state)), mode_(mode) {}
  ~Hold();
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

  const std::shared_ptr<HoldState>& state() const noexcept { return state_; }
  LockMode mode() const noexcept { return mode_; }
  bool released() const noexcept { return released_; }
  void set_released() noexcept { released_ = true; }

  // Registered lost callbacks; they unregister when the Hold dies.
  std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>> callbacks;

 private:
  std::shared_ptr<HoldState> state_;
  LockMode mode_;
  bool released_ = false;
};

}  // namespace dlock::detail
