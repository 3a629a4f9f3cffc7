// Lease: one hold of a lock, returned by ILockProvider. Releasing it gives the hold back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "dlock/options.h"

namespace dlock {

namespace detail {
class Hold;  // the core's bookkeeping for one hold; see core/src/hold.h
}

// Thread safety: a Lease is not synchronized: use one Lease from one thread at a time
// (move it to hand it over). Different Leases, even of the same lock, are independent.
// The lost token and callbacks may be used from any thread.
class [[nodiscard]] Lease {
 public:
  // An empty lease: holds nothing; release() returns false.
  Lease() noexcept;
  explicit Lease(std::unique_ptr<detail::Hold> hold) noexcept;
  Lease(Lease&&) noexcept;
  // Releases what *this holds (best effort, never throws), then takes `other`'s hold.
  Lease& operator=(Lease&&) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  // Releases best effort; never throws. A lease that cannot be released (server down)
  // ends by itself: lease-based locks expire, session-based ones die with the session.
  ~Lease();

  // True while this hold is not released, its lock is not known lost, and the moment its lost
  // signal is due (a margin before expires_at(), see lost_token) has not come: a holder whose
  // watchdog has not run since (a paused process) is not told it holds a lock past its end.
  bool held() const noexcept;
  explicit operator bool() const noexcept { return held(); }

  const std::string& name() const noexcept;
  LockMode mode() const noexcept;
  // The owner this hold belongs to (the thread's or AcquireOptions::owner).
  const std::string& owner() const noexcept;

  // Fencing token of the acquisition: strictly greater than every token an earlier holder
  // of the same name received (where the provider claims fencing). Re-entrant holds share
  // their first hold's token. Give it to the protected resource so it can reject stale
  // writers. 0 for an empty lease.
  std::uint64_t fencing_token() const noexcept;

  // When the lock stops being valid unless renewed, on this host's steady clock; a
  // conservative estimate of the server's expiry (measured from before the request was
  // sent). time_point::max() for a session-based lock without explicit lease. Once the
  // backend learns the lock is gone (a renewal found no lock, the session ended), the
  // moment it learned that: someone else may hold the lock from then on.
  std::chrono::steady_clock::time_point expires_at() const noexcept;

  // Gives this hold back. Idempotent.
  // Returns true if this call released a hold that was still held; false if the lease was
  // empty or already released, or the backend found the lock no longer held by this owner
  // (expired, stolen, lost) — in that case the current holder is untouched and the lost
  // signal fires. With re-entrant holds, the lock itself is released with the last one.
  // Throws Error(unavailable) if the backend could not be reached; the hold then stays and
  // release() may be called again.
  bool release();

  // Sets the lease to `lease` from now (server clock), checking ownership.
  // Throws Error(invalid_argument) for lease <= 0, Error(not_held) if the lock is no longer
  // held by this owner (the lost signal fires), Error(unavailable) if the backend could not
  // be reached. On a session-based backend it only checks ownership and moves the
  // client-enforced expiry.
  void extend(std::chrono::milliseconds lease);

  // Fires (once, never reset) as soon as the client knows the lock may no longer be held:
  // renewal found another owner or no lock, renewal kept failing until the lease was about
  // to run out (it fires a safety margin — 5% of the lease, at least 50 ms, at most a
  // quarter of it — before expires_at(), so the holder is told before anyone else can be
  // granted the lock), the session ended, max_hold was reached. A normal release() does not fire it.
  // An empty lease returns a token that can never fire.
  std::stop_token lost_token() const noexcept;

  // Runs `callback` once when the lost signal fires (at once, on this thread, if it has
  // already fired). The callback runs on the thread that noticed the loss (dlock's, or a
  // backend's own): keep it short. It may release or drop this Lease (or any other): the
  // server is then told in the background, and the provider may be dropped already. Never
  // block on dlock from it otherwise (an acquire, another held Lease's release()). An
  // exception it throws is caught and dropped (the other callbacks still run).
  // It is unregistered when this Lease is destroyed or released.
  void on_lost(std::function<void()> callback);

 private:
  std::unique_ptr<detail::Hold> hold_;
};

// How long before a lease of length `lease` runs out the core fires its lost signal (see
// Lease::lost_token): 5% of it, at least 50 ms, at most a quarter of it. It covers a late
// wake-up on a loaded machine; what must be over before someone else can be granted the lock
// (a command working under it, killed) is due that long before the lease's end too.
std::chrono::milliseconds loss_margin(std::chrono::milliseconds lease) noexcept;

}  // namespace dlock
