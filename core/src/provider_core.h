// ProviderCore: the provider logic written once for every backend. Private to the core.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "dlock/lease.h"
#include "dlock/spi/backend.h"
#include "dlock/spi/fork_guard.h"
#include "dlock/wait.h"
#include "hold.h"
#include "scheduler.h"
#include "sync.h"

namespace dlock::detail {

// Thread-safe. Owned by the provider and by every live HoldState.
class ProviderCore : public std::enable_shared_from_this<ProviderCore> {
 public:
  explicit ProviderCore(std::shared_ptr<spi::Backend> backend);

  const Capabilities& capabilities() const noexcept { return caps_; }
  std::optional<Lease> try_acquire(std::string_view name, LockMode mode, Wait wait,
                                   const AcquireOptions& options);
  // Lease::release / Lease::extend / ~Lease.
  bool release(Hold& hold);
  void extend(Hold& hold, std::chrono::milliseconds lease);
  // Gives up on a hold: marks it ended (no Lease of it releases again), fires its lost
  // signal, and has the watchdog release it on the backend at `release_at` (owner-checked:
  // the server must end up without the hold). Never blocks on the backend. Returns false if
  // it had already ended.
  bool give_up(const std::shared_ptr<HoldState>& state, Clock::time_point release_at) noexcept;
  // Releases a given-up hold on the backend, owner-checked. One that is not answered
  // (`unavailable`) is retried by the watchdog until the lock ends on its own; other
  // failures are ignored (the lease expires or the session ends anyway). May block for a
  // round trip.
  void release_given_up(HoldState& state) noexcept;
  // ~Hold, after release(hold) threw (no answer): the dropped Lease's hold is given up, so
  // that no later acquire of its owner re-enters a lock the unanswered release may have
  // freed on the server; the watchdog releases it again. Never blocks on the backend.
  void give_up_dropped(Hold& hold) noexcept;
  // Hands `reference` (a HoldState, or this core) to the watchdog's worker, which drops it:
  // a reference that may be this core's last, held by a thread that must not end the
  // provider (see lost_signal.h).
  // `this` may be gone as soon as it returns.
  void dispose(std::shared_ptr<const void> reference) noexcept;

 private:
  using Key = std::pair<std::string, std::string>;  // (name, owner)

  void validate(std::string_view name, LockMode mode, const AcquireOptions& options) const;
  // Re-entry by an owner that already holds the name; nullopt if it holds nothing usable.
  std::optional<Lease> reenter(const Key& key, LockMode mode, Clock::time_point deadline)
      DLOCK_EXCLUDES(mu_);
  // REQUIRES: mu_ held. Drops the map's reference to `st` once no Lease holds it: the map
  // must never keep a HoldState (and through it this core) alive on its own.
  void forget_locked(const HoldState& st) DLOCK_REQUIRES(mu_);

  std::shared_ptr<spi::Backend> backend_;
  const Capabilities caps_;
  const std::string client_id_;  // in the process that made this core (fork_)
  const spi::ForkGuard fork_;
  std::atomic<std::uint64_t> next_seq_{1};

  // Also guards every HoldState's holds/releasing/ended (see hold.h).
  Mutex mu_;
  std::condition_variable released_;  // a releasing HoldState finished; waits on mu_
  std::map<Key, std::shared_ptr<HoldState>> holds_ DLOCK_GUARDED_BY(mu_);

  Scheduler scheduler_;  // last: stopped first
};

}  // namespace dlock::detail
