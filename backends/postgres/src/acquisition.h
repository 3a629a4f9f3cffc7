// PgAcquisition: one acquire call in advisory mode.
//
// A try (1 round trip) on a multiplexed holder session; if busy and the caller will wait (or
// at once, for a caller that will wait on a name whose key is known: queue_at_once()), a
// dedicated waiter session sends the blocking acquire, which sits in the server's
// lock queue (FIFO, a waiting writer keeps new readers out) for at most wait_chunk
// (lock_timeout); the monitor thread sees its result and wakes the core, and the next
// attempt() answers from it without a round trip. The last chunk ends at the caller's
// deadline (lock_timeout set to the time left), so a waiter that times out leaves the
// server's queue by itself, at its deadline, with no cancel request (a new connection).
// On a chunk's end (55P03) the lock may have been granted after all (PostgreSQL's
// LockErrorCleanup): the unlock that follows undoes such a grant, then the wait is sent
// again unless the deadline has passed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dlock/spi/backend.h"
#include "pg_backend.h"

namespace dlock::postgres {

class PgAcquisition : public spi::Acquisition {
 public:
  PgAcquisition(PgBackend& backend, const spi::AttemptRequest& request, std::function<void()> wake);
  // Abandons a wait: at its deadline, reads the wait's answer (the server ends it then);
  // earlier (cancellation), cancels it (pg_cancel_backend on an idle session of the pool;
  // libpq's cancel request, a new connection, when none is idle). Then undoes a grant that
  // raced with the give-up and returns the session to the pool (or closes it when in doubt).
  // Blocks about two round trips (a cancel request: a connection's setup more); against a
  // server that stops answering, at most command_timeout (then the session is closed).
  ~PgAcquisition() override;

  spi::Attempt attempt() override;
  std::chrono::milliseconds fallback_poll() const noexcept override;

 private:
  using Clock = spi::HeldLock::Clock;

  std::int64_t key() const;
  // Takes this name's key from the provider's cache of confirmed owners, if it is there
  // (no round trip). True if it was.
  bool adopt_known_key();
  // Makes index_ a key this name owns: the cached answer, else claims candidates on `s`
  // (REQUIRES: its mu held) until one is the name's. Throws what the server answered.
  void resolve_key_locked(Session& s);
  bool shared() const noexcept { return request_.mode == LockMode::shared; }
  // A try on a holder session, moving to the next candidate key on a collision.
  spi::Attempt try_once();
  // Sends the blocking acquire on waiter_ (REQUIRES: waiter_->mu held), with a lock_timeout
  // that ends it at the caller's deadline or after wait_chunk, whichever comes first.
  void send_wait();
  bool past_deadline() const noexcept { return Clock::now() >= request_.deadline; }
  // Sends the blocking acquire on waiter_ (taken from the pool by the caller) and reads its
  // answer here if it comes within `window` (0: never). True if it came (or the connection
  // ended): from_waiter() takes it. A send that fails drops the session and throws.
  bool start_wait(std::chrono::microseconds window);
  // A caller who will wait, on a name whose key is resolved (REQUIRES: resolved_): the
  // blocking acquire goes to the server's queue at once, without a try first (one round trip
  // less on every contended acquire; a free lock is granted by that same statement). An answer within
  // kAnswerWindow is read here (an uncontended wait costs no thread hop), a later one by
  // the monitor. nullopt when no waiter session can be had: the caller tries instead.
  std::optional<spi::Attempt> queue_at_once();
  // Reads the finished wait of waiter_: a grant, or Busy after sending the next wait.
  spi::Attempt from_waiter();
  // Unlocks key() on `s` (REQUIRES: its mu held); closes it when that fails. True if held.
  bool unlock_locked(Session& s, std::int64_t key) noexcept;
  std::shared_ptr<PgHeldLock> make_hold(std::shared_ptr<Session> s, std::int64_t key,
                                        std::int64_t token, Clock::time_point sent);
  void abandon() noexcept;
  // Ends the wait in flight on `c` (waiter_'s connection; REQUIRES: its mu held) by
  // pg_cancel_backend on `helper` (an idle session reserved by SessionPool::for_cancel(),
  // may be null), else by libpq's cancel request. True if the cancel was taken or the wait
  // has ended already.
  bool cancel_wait(PgConn& c, Session* helper, Clock::time_point deadline) noexcept;

  PgBackend& backend_;
  const std::shared_ptr<SessionPool> pool_;
  const spi::AttemptRequest& request_;
  const std::function<void()> wake_;
  const std::string identity_;
  int index_ = 0;                     // which candidate key (keys.h)
  bool resolved_ = false;             // index_ is confirmed as this name's own key
  mutable int key_index_ = -1;        // key_ is candidate key_index_ (hashed once per index)
  mutable std::int64_t key_ = 0;
  std::shared_ptr<Session> waiter_;   // dedicated while a wait is on the server
  // When the server ends the wait in flight by itself (its lock_timeout runs from a little
  // later: when the statement arrives); max() when it never does.
  Clock::time_point wait_ends_ = Clock::time_point::max();
  bool attempted_ = false;            // attempt() ran before
  bool pool_full_ = false;            // no waiter session could be had: poll
};

}  // namespace dlock::postgres
