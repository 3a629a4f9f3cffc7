// SessionHolds: the live holds of one server session (a ZooKeeper handle, a SQL connection),
// so that one session event reaches every hold on it at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "dlock/spi/held_lock.h"

namespace dlock::spi {

// Thread-safe. Keeps weak references: a hold the core dropped disappears by itself.
class SessionHolds {
 public:
  using Clock = HeldLock::Clock;

  // Adds a hold granted on this session. If the session already ended (mark_all_lost was
  // called), the hold is marked lost at once: a grant racing with the session's end is lost.
  void add(const std::shared_ptr<HeldLock>& lock);
  // Removes a hold (released). Unknown holds are ignored.
  void remove(const HeldLock& lock) noexcept;
  // The session answered a request sent at `sent`: every live hold's server expiry becomes
  // `expiry` (the caller computes sent + S - drift).
  void refresh(Clock::time_point expiry) noexcept;
  // The session ended or is in doubt: marks every live hold lost (their lost signals fire
  // now) and remembers that the session is over. The server may grant those locks to
  // someone else from now on, so each hold's server expiry becomes now (a caller bounding
  // work by expires_at() stops at once). Returns how many were marked.
  std::size_t mark_all_lost() noexcept;
  bool ended() const noexcept;
  // The live holds (for probes and diagnostics).
  std::vector<std::shared_ptr<HeldLock>> live() const;
  std::size_t size() const noexcept;

 private:
  void prune_locked() const noexcept;

  mutable std::mutex mu_;
  mutable std::vector<std::weak_ptr<HeldLock>> holds_;  // guarded by mu_
  bool ended_ = false;                                  // guarded by mu_
};

}  // namespace dlock::spi
