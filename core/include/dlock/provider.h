// ILockProvider: the backend-neutral lock service. Obtain one with dlock::open(uri).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dlock/lease.h"
#include "dlock/options.h"
#include "dlock/wait.h"

namespace dlock {

// Thread safety: every method may be called from any thread concurrently.
// Every acquiring method is [[nodiscard]]: a discarded Lease releases the lock at once, so
// `locks->lock("job");` is a bug the compiler reports.
// Lifetime: live leases keep the provider's machinery (backend connection, watchdog) alive:
// dropping the provider while holding leases neither releases them nor stops their renewal.
class ILockProvider {
 public:
  virtual ~ILockProvider() = default;

  virtual const Capabilities& capabilities() const noexcept = 0;
  // The URI the provider was opened with, password replaced by "***" (Uri::redacted():
  // without a password or secret parameter, it opens the same lock service).
  virtual const std::string& uri() const noexcept = 0;

  // Acquires `name` in `mode`, waiting at most `wait`.
  // Returns the lease, or an empty optional if the lock was not acquired within the wait or
  // the wait was cancelled through options.cancel. Returns within the wait plus one round
  // trip; a waiter that gives up leaves nothing behind (no queue entry, node or row).
  // If the owner already holds the name in the same mode (or exclusively when asking for
  // shared), it is a re-entry: granted at once, one more release needed.
  // Throws Error:
  //   invalid_argument  empty name, name longer than capabilities().max_name_bytes, bad
  //                     owner, lease/max_hold <= 0;
  //   unsupported       shared mode without read_write, fair without fair;
  //   would_deadlock    exclusive asked by an owner holding the name shared (upgrade);
  //   unavailable       the backend could not be reached within its connect timeout.
  [[nodiscard]] virtual std::optional<Lease> try_acquire(std::string_view name, LockMode mode, Wait wait,
                                           const AcquireOptions& options = {}) = 0;

  // As try_acquire, but failing to acquire is an error: throws Error(timed_out) when the
  // wait ran out, Error(cancelled) when options.cancel was requested.
  [[nodiscard]] Lease acquire(std::string_view name, LockMode mode, Wait wait,
                const AcquireOptions& options = {});

  // std-style shorthands for exclusive and shared holds.
  [[nodiscard]] std::optional<Lease> try_lock(std::string_view name, Wait wait = Wait::try_once(),
                                const AcquireOptions& options = {}) {
    return try_acquire(name, LockMode::exclusive, wait, options);
  }
  [[nodiscard]] Lease lock(std::string_view name, const AcquireOptions& options = {}) {
    return acquire(name, LockMode::exclusive, Wait::forever(), options);
  }
  [[nodiscard]] std::optional<Lease> try_lock_shared(std::string_view name, Wait wait = Wait::try_once(),
                                       const AcquireOptions& options = {}) {
    return try_acquire(name, LockMode::shared, wait, options);
  }
  [[nodiscard]] Lease lock_shared(std::string_view name, const AcquireOptions& options = {}) {
    return acquire(name, LockMode::shared, Wait::forever(), options);
  }
};

}  // namespace dlock
