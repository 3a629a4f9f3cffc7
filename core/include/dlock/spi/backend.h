// The backend SPI: what a backend implements so that the core can offer ILockProvider on it.
// The full contract, with the reasons behind it, is docs/ARCHITECTURE.md ("The backend SPI").
//
// The core does, once for every backend: name and option validation, reentrancy and
// read-inside-write bookkeeping (a backend never sees a re-entry: each owner_key asks for a
// name at most once at a time), upgrade refusal, the wait loop (deadline, cancellation,
// wake-ups, fallback poll, retrying `unavailable` while a wait lasts), the watchdog (lease
// renewal every lease/3 and session probes every S/3, batched through extend_many), max_hold,
// client-enforced leases, the lost signal, and the clean-up of every hold it gives up.
//
// A backend does the atomic server operations. Each method below states its contract.
// Every method may be called concurrently from several threads (for different requests).
// Errors: throw dlock::Error (unavailable for transport failures, internal for replies that
// make no sense, invalid_argument for what the user must fix); translate the client
// library's errors in one function.
//
// Session backends (Liveness::session: ZooKeeper, SQL session locks, file://):
//  - capabilities().default_lease is S, the server's dead-client bound; the core probes every
//    session hold every S/3 through extend_many (also with an explicit lease, and after
//    Lease::extend), and fires the lost signal a margin before HeldLock::server_expiry();
//  - a backend never puts two holds of one name on one server session (SQL sessions stack
//    re-locks: two owners would both be granted);
//  - release() on a dead session returns false;
//  - a HeldLock owns its session or connection; its destructor must not block (hand the
//    clean-up to a backend thread);
//  - when a session ends, every hold on it is marked lost at once (see session_holds.h);
//  - a hold marked lost is given up by the core, which then calls release() once: make the
//    server forget it (delete the node, close the doubtful connection). Never resurrect a
//    session (no silent reconnect of a lock connection).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "dlock/options.h"
#include "dlock/spi/held_lock.h"

namespace dlock::spi {

// What one acquire call asks for. The core keeps the request and the strings it views alive
// until the Acquisition made from it is destroyed.
struct AttemptRequest {
  std::string_view name;       // 1..max_name_bytes arbitrary bytes (escape before use!)
  LockMode mode = LockMode::exclusive;
  // Unique per Acquisition (per provider instance, owner and grant): the core never reuses
  // one, not even for the next Acquisition of the same call (after `unavailable`), so
  // whatever undoes an Acquisition by its owner key, however late, never touches another's.
  std::string_view owner_key;
  std::chrono::milliseconds lease{0};  // lease-based backends: TTL to set, on the server clock
  bool fair = false;
  // Unique per Acquisition, like owner_key: the key of a fair-queue entry, waiter node or
  // waiter connection that lives between attempts.
  std::string_view waiter_id;
  // false for a try-once acquire: attempt() is called once and a Busy must leave nothing
  // behind (no queue entry, node, row or blocked wait).
  bool will_wait = false;
  // When the caller stops waiting (steady clock; max() for ever). A backend whose wait
  // blocks on the server can let the server end it there (PostgreSQL's lock_timeout), so
  // that giving up at the deadline needs no cancel. Cancellation may still come earlier.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// The lock is busy. retry_after, if known (e.g. the holder's remaining TTL), bounds how
// long the core sleeps before the next attempt when no wake-up arrives.
struct Busy {
  std::optional<std::chrono::milliseconds> retry_after;
};

using Attempt = std::variant<std::shared_ptr<HeldLock>, Busy>;

// Result of renewing (lease backends) or probing (session backends) one lock.
enum class RenewStatus {
  renewed,   // owner checked, lease reset / session answered; the backend set server_expiry
  not_held,  // the lock is gone or has another owner: the core fires the lost signal
  failed,    // could not tell (transport error): the core retries until the lease runs out
};

// One acquire call, from its first attempt until it is granted or given up. It owns whatever
// the acquire leaves on the server between attempts: a fair-queue entry, a waiter node, a
// blocking wait on a waiter connection, a subscription.
//
// Not thread-safe: the core calls attempt() and fallback_poll() from one thread at a time.
// `wake` (given to begin_acquire) may be called from any thread, any number of times
// (spurious calls are fine), until the destructor returns.
class Acquisition {
 public:
  // Abandons the acquire unless an attempt returned a grant: removes everything its attempts
  // left (queue entry, node, row, blocked wait) and undoes a grant that raced with the give-up
  // (a server-side wait that succeeded after the core stopped asking). Never throws; blocks
  // at most about one command timeout (hand slow clean-up to a backend thread).
  virtual ~Acquisition() = default;

  // One atomic attempt: a grant (the HeldLock with its fencing token and server_expiry set;
  // ownership passes to the core) or Busy. Must never grant a name to two owner_keys at
  // once (exclusive), nor exclusive next to shared.
  //  - The first call is the acquire's first attempt. Without request.will_wait it is the
  //    only one, and a Busy leaves nothing behind.
  //  - No lost wake-ups: once an attempt has returned Busy, `wake` must be called (or
  //    wait_fd() become readable) whenever the lock may have become free for this acquire.
  //    A backend that can only register for wake-ups after seeing the lock busy (a pub/sub
  //    subscription) registers and attempts again inside the same call before returning Busy.
  //  - A later attempt may answer without a round trip from what its registration delivered
  //    (a grant handed over by the server, a server-side blocking wait that returned).
  //  - Never called again after it returned a grant or threw.
  // Throws Error (unavailable: the core retries it while the wait lasts).
  virtual Attempt attempt() = 0;

  // How long the core may sleep after a Busy when `wake` is not called. While the push
  // channel is healthy, a long value (Busy::retry_after, if set, bounds it anyway); while it
  // is down, a short poll interval. May change over time.
  virtual std::chrono::milliseconds fallback_poll() const noexcept = 0;

  // A descriptor the core polls for readability between attempts, beside `wake`: once it is
  // readable, the next attempt() has an answer to read. It lets the waiting thread read a
  // blocking wait's reply itself instead of being woken by another thread that read it (one
  // thread hand-over less per grant). -1 (the default) when there is none; asked again after
  // every Busy. The descriptor stays owned by the Acquisition.
  virtual int wait_fd() const noexcept { return -1; }

  Acquisition() = default;
  Acquisition(const Acquisition&) = delete;
  Acquisition& operator=(const Acquisition&) = delete;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Constant for the backend's lifetime.
  virtual const Capabilities& capabilities() const noexcept = 0;

  // Starts one acquire call. Cheap: no round trip is needed before the first attempt().
  // `request` (and the strings it views) outlives the returned object.
  virtual std::unique_ptr<Acquisition> begin_acquire(const AttemptRequest& request,
                                                     std::function<void()> wake) = 0;

  // Owner-checked release. Returns true if released, false if the lock was no longer held
  // by lock.owner_key() (nothing of another holder is touched then; a dead session answers
  // false). Throws Error(unavailable) when it cannot tell; the core keeps the hold then.
  virtual bool release(HeldLock& lock) = 0;

  // Lease backends: owner-checked renewal of each lock to `lease` from now, many locks per
  // round trip. Session backends: a liveness probe of each lock's session (one per session,
  // not per lock); `lease` is then capabilities().default_lease and is ignored. out[i]
  // answers locks[i]; on `renewed` the backend calls locks[i]->set_server_expiry() with its
  // new estimate, taken from before the request was sent. Never throws: failures are
  // RenewStatus::failed.
  virtual void extend_many(std::span<HeldLock* const> locks, std::chrono::milliseconds lease,
                           std::span<RenewStatus> out) noexcept = 0;
};

}  // namespace dlock::spi
