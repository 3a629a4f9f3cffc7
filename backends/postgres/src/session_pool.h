// SessionPool: the backend's lock connections and the monitor thread that watches them.
//
// Holder sessions are multiplexed: a try goes to a session that holds nothing on its key
// (two holds of one key on one session would both be granted: advisory locks stack). A
// blocking wait gets a session of its own (dedicated) until it is granted or given up; a
// granted waiter session then serves tries like any other. At most `pool` sessions.
//
// The monitor thread polls the socket of every session nobody is using: an idle lock
// connection that becomes readable has been terminated (pg_terminate_backend, restart,
// idle_session_timeout) or carries the result of a blocking wait. A dead session's holds
// are marked lost at once (Session::close_locked) and the session is never reused.
// A session whose socket wakes the monitor while a caller is using it (the caller's own
// reply) is left out of the poll set for up to 10 ms (or until the next poke), so a busy
// session costs the monitor ~100 wake-ups a second rather than one per statement.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "key_owners.h"
#include "options.h"
#include "session.h"

namespace dlock::postgres {

class SessionPool : public std::enable_shared_from_this<SessionPool> {
 public:
  // `prepare_sql` runs on every new connection (PREPAREs, the token bump: sql.h). Starts the monitor thread.
  SessionPool(PgOptions options, std::string prepare_sql);
  // Stops the monitor and closes every connection (the server frees their locks).
  ~SessionPool();

  const PgOptions& options() const noexcept { return options_; }

  // Opens a connection and prepares it (not counted in the pool until add()ed).
  std::shared_ptr<Session> open_session();
  // Adds a session opened by open_session() (e.g. the first one, at open).
  void add(std::shared_ptr<Session> s);

  // A session that does not hold `key`, with `key` reserved on it: an idle one, a new one
  // while under the cap, else the least used. nullptr when the pool is full and every
  // session holds the key (or is dedicated to a wait). Throws unavailable when a new
  // connection fails.
  std::shared_ptr<Session> for_try(std::int64_t key);
  // Drops the reservation of `key` (busy try, released hold) and the caller's use.
  void unreserve(Session& s, std::int64_t key);
  // The caller's try on `s` ended with the key held: the reservation stays (the hold's).
  void done_using(Session& s);

  // A session dedicated to one blocking wait: an unused one or a new one; nullptr when the
  // pool is full (the waiter then polls). Throws unavailable when a new connection fails.
  // With `keep_spare`, a wait that would take the last session a cancel could be sent on
  // (for_cancel) gets a new one instead while the pool has room, so a later cancel of it
  // needs no connection (if that connection fails, the last one is taken after all).
  std::shared_ptr<Session> for_wait(bool keep_spare = false);
  // A session that can carry a cancel at once: live, not dedicated to a wait, no caller
  // using it (one without holds first). Reserved for the caller (as a user: tries look
  // elsewhere, waits never take it) until done_using(). nullptr when there is none: never
  // opens one, never waits for one.
  std::shared_ptr<Session> for_cancel();
  // The wait on `s` was granted `key`: `s` becomes a holder session.
  void wait_granted(Session& s, std::int64_t key);
  // The wait on `s` ended without a grant: `s` returns to the pool (or leaves it if dead).
  void wait_ended(const std::shared_ptr<Session>& s);

  // `s` is dead or in doubt (REQUIRES: the caller called s.close_locked(), which marked its
  // holds lost, and unlocked it since): forgets it.
  void forget(const std::shared_ptr<Session>& s);

  // Wakes the monitor so it watches a session whose state just changed (a wait was sent).
  void poke() noexcept;

  // Hands the unlock of a hold that was dropped without release to the monitor thread.
  void unlock_later(std::shared_ptr<Session> s, std::int64_t key, bool shared);

  std::size_t size() const;

  // The keys confirmed as their names' own (shared by every acquire of this backend).
  KeyOwners owners;

 private:
  void monitor_loop();
  void check(const std::shared_ptr<Session>& s);
  void run_unlocks();
  std::shared_ptr<Session> open_counted();

  const PgOptions options_;
  const std::string prepare_sql_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Session>> sessions_;  // guarded by mu_
  std::size_t opening_ = 0;                          // guarded by mu_
  struct Unlock {
    std::shared_ptr<Session> session;
    std::int64_t key;
    bool shared;
  };
  std::deque<Unlock> unlocks_;  // guarded by mu_
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::thread monitor_;
};

}  // namespace dlock::postgres
