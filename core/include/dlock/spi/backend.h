// The backend SPI: what a backend implements so that the core can offer ILockProvider on it.
//
// The core does, once for every backend: name and option validation, reentrancy and
// read-inside-write bookkeeping (a backend never sees a re-entry: each owner_key asks for a
// name at most once at a time), upgrade refusal, the wait loop (deadline, cancellation,
// wake-ups, fallback poll), the watchdog (renewal every lease/3, batched through
// extend_many), max_hold, client-enforced leases on session backends, and the lost signal.
//
// A backend does the atomic server operations. Each method below states its contract.
// Every method may be called concurrently from several threads (for different requests).
// Errors: throw dlock::Error (unavailable for transport failures, internal for replies that
// make no sense); translate the client library's errors in one function.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <variant>

#include "dlock/options.h"
#include "dlock/spi/held_lock.h"

namespace dlock::spi {

// One atomic attempt to take a lock.
struct AttemptRequest {
  std::string_view name;       // 1..max_name_bytes arbitrary bytes (escape before use!)
  LockMode mode = LockMode::exclusive;
  std::string_view owner_key;  // unique per (provider instance, owner): "<client-id>:<owner>"
  std::chrono::milliseconds lease{0};  // lease-based backends: TTL to set, on the server clock
  bool fair = false;
  // Unique per acquire call, stable across its attempts: the key of a fair-queue entry or a
  // waiter node that must survive between attempts.
  std::string_view waiter_id;
  // false for a try-once acquire: a fair backend must not leave a queue entry behind.
  bool will_wait = false;
};

// The lock is busy. retry_after, if known (e.g. the holder's remaining TTL), bounds how
// long the core sleeps before the next attempt when no wake-up arrives.
struct Busy {
  std::optional<std::chrono::milliseconds> retry_after;
};

using Attempt = std::variant<std::shared_ptr<HeldLock>, Busy>;

// Result of renewing one lock.
enum class RenewStatus {
  renewed,   // owner checked, lease reset; HeldLock::expires_at updated by the backend
  not_held,  // the lock is gone or has another owner: the core fires the lost signal
  failed,    // could not tell (transport error): the core retries until the lease runs out
};

// A waiter's registration for push wake-ups; destroying it unregisters.
class WaitRegistration {
 public:
  virtual ~WaitRegistration() = default;
  // How long the core may sleep between attempts when nothing wakes it. Backends whose push
  // channel is healthy return a long value (or the holder's TTL through Busy::retry_after
  // bounds it anyway); while the channel is down, a short poll interval. May change over time.
  virtual std::chrono::milliseconds fallback_poll() const noexcept = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Constant for the backend's lifetime.
  virtual const Capabilities& capabilities() const noexcept = 0;

  // One atomic attempt. Grants (returning the HeldLock, with fencing token and expiry set)
  // or reports Busy. Must never grant a name to two owner_keys at once (exclusive), nor
  // exclusive next to shared. On a lease backend the server expires the grant after
  // request.lease unless renewed.
  virtual Attempt try_acquire(const AttemptRequest& request) = 0;

  // Registers `wake` to be called (from any thread, possibly spuriously) when `request.name`
  // may have become free for this waiter. Called after a first Busy and before the next
  // attempt, so a release between the two cannot be missed. Return nullptr when the backend
  // has no push channel: the core then polls with a short backoff.
  virtual std::unique_ptr<WaitRegistration> prepare_wait(const AttemptRequest& request,
                                                         std::function<void()> wake) = 0;

  // The acquire identified by request.waiter_id gave up (timed out, cancelled, or failed):
  // remove anything its attempts left (fair-queue entry, waiter node). Never throws.
  virtual void abandon(const AttemptRequest& request) noexcept = 0;

  // Owner-checked release. Returns true if released, false if the lock was no longer held
  // by lock.owner_key() (nothing is touched then). Throws Error(unavailable).
  virtual bool release(HeldLock& lock) = 0;

  // Owner-checked renewal of each lock to `lease` from now; out[i] answers locks[i].
  // Lease backends should renew many locks in one round trip. Session backends answer
  // renewed while the session holds the lock. Never throws: failures are RenewStatus::failed.
  virtual void extend_many(std::span<HeldLock* const> locks, std::chrono::milliseconds lease,
                           std::span<RenewStatus> out) noexcept = 0;
};

}  // namespace dlock::spi
