// RedisBackend: the atomic Redis operations behind redis:// providers (the core adds
// reentrancy, the wait loop and the watchdog). See backends/redis/README.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "dlock/spi/backend.h"
#include "connection.h"
#include "keys.h"
#include "options.h"
#include "pool.h"
#include "scripts.h"

namespace dlock::redis {

// A granted hold, with the id that makes its release idempotent across retries.
class RedisHeldLock : public spi::HeldLock {
 public:
  RedisHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
                Clock::time_point server_expiry);
  // Random, unique per grant; names this hold's release latch key.
  const std::string& release_id() const noexcept { return release_id_; }
  // The longest lease a renewal of this hold asked for whose reply was never read (0 if
  // none): the server may run that renewal late, even after the core gave the hold up.
  std::chrono::milliseconds unanswered_renewal() const noexcept {
    return std::chrono::milliseconds(unanswered_renewal_ms_.load());
  }
  void note_unanswered_renewal(std::chrono::milliseconds lease) noexcept;

 private:
  const std::string release_id_;
  std::atomic<std::int64_t> unanswered_renewal_ms_{0};
};

// Thread safety: every method may be called concurrently (connections come from the pool).
class RedisBackend : public spi::Backend {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects once (so a bad URI, password or db fails here) and loads the scripts.
  // Throws Error(unavailable) if the server cannot be reached within connect_timeout,
  // Error(invalid_argument) for authentication or database errors.
  explicit RedisBackend(RedisOptions options);
  ~RedisBackend() override;

  const Capabilities& capabilities() const noexcept override { return caps_; }
  // A RedisAcquisition (acquisition.h); no round trip.
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  // One EVALSHA of lua/release.lua, retried once after a transport failure (the latch key
  // makes the retry harmless). A hold past its estimated end is left to expire on the
  // server (false, nothing sent), unless a renewal of it went unanswered: that renewal may
  // run late and renew it for a full lease, so the clean-up thread releases it after it.
  bool release(spi::HeldLock& lock) override;
  // One pipelined round trip: one lua/extend.lua call per chunk of up to 100 locks.
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

  const RedisOptions& options() const noexcept { return options_; }

  // Queues, without sending, CLIENT REPLY SKIP and the acquire script as the first attempt
  // of `req` (a caller that waits), told that nothing reads its reply (ARGV[11]): a grant is
  // pushed to the caller's own grant list, where the BLPOP queued right behind returns it at
  // once. So a waiter queues and blocks in one write, and the server writes nothing back
  // until the grant. A failure of that attempt (NOSCRIPT, OOM, a data-loss pause) shows at
  // the caller's next refresh, within fair_heartbeat/3.
  // `k`: req.name's keys, as the caller already built them. (Public for the tests that
  // deliver it late.)
  void append_silent_acquire(Connection& c, const spi::AttemptRequest& req, const LockKeys& k) const;

 private:
  friend class RedisAcquisition;
  // One EVALSHA of lua/acquire.lua (retried once on a new connection if the server closed
  // the connection; not after a timeout). `may_hold`: this owner may already hold the lock
  // (ARGV[7]). Returns the script's answer (token > 0, or -(holder's ms left + 1), or 0) and
  // sets `sent` to when the request that answered left. Throws Error(unavailable) on
  // transport failure or a transient server refusal (READONLY, OOM, LOADING…); sets `lost`
  // when a request may have reached the server without its reply being read (it may have
  // run, or still run later: the caller must undo it, see abandon()).
  long long run_acquire(const spi::AttemptRequest& req, bool may_hold, Clock::time_point& sent, bool& lost);
  // Whether a waiting acquire of `name` should start with the silent attempt: the user may
  // run CLIENT REPLY, and this process's last first attempt on `name` found it busy (a
  // contended name; elsewhere the plain attempt is cheaper: one script, no BLPOP).
  bool queues_at_once(std::string_view name);
  void note_busy(std::string_view name);
  // Undoes what an acquire that was not granted left: one EVALSHA of lua/abandon.lua (the
  // queue entry, the grant list, a hold of req.owner_key: never granted to the caller, so
  // nobody's). Never throws, never blocks past one command timeout (twice if the server
  // closed the connection). `lost`: a request of the acquire may still be on its way or
  // waiting in the server (its reply was lost): the abandon goes to the clean-up thread at
  // once, which makes it run after that request (see clean_up_loop). An abandon that fails
  // is handed to it too. `silent_pending`: the acquire's silent first attempt may still reach
  // the server after the abandon (another connection: the server orders requests per
  // connection only); the abandon leaves a mark that makes it grant nothing.
  void abandon(const spi::AttemptRequest& req, bool lost, bool silent_pending) noexcept;
  // The hold granted to `req` by a request sent at `sent`.
  std::shared_ptr<spi::HeldLock> make_held(const spi::AttemptRequest& req, std::uint64_t token,
                                           Clock::time_point sent) const;
  // A connection for a blocking wait (grant_wait.h): one kept from an earlier grant, else a
  // new one. Throws Error(unavailable).
  std::unique_ptr<Connection> wait_connection();
  // Keeps an idle connection (a wait that was granted) for the next wait, up to 8.
  void keep_wait_connection(std::unique_ptr<Connection> c) noexcept;
  template <class Op>
  auto with_retry(Op&& op);

  // An abandon (or, with a release_id, a release) the clean-up thread still has to run.
  struct Undo {
    std::string name, owner_key, waiter_id, release_id;
    LockMode mode;
    std::chrono::milliseconds lease;
    bool silent_pending;
    Clock::time_point next_try, give_up;
    std::chrono::milliseconds backoff{0};  // before the next try: 50 ms doubling to 1 s
  };
  void hand_over(const spi::AttemptRequest& req, bool silent_pending) noexcept;
  void hand_over_release(const RedisHeldLock& held) noexcept;
  void queue_undo(Undo u) noexcept;
  // The clean-up thread: runs each Undo (PING, then the abandon, one round trip after the
  // other) until it gets through or give_up passes.
  void clean_up_loop() noexcept;
  // One PING then one abandon (or release) on one pooled connection. Throws Error.
  void barrier_abandon(const Undo& u);
  // One EVALSHA of lua/release.lua on `conn`. Throws Error.
  Reply run_release(Connection& conn, std::string_view name, std::string_view owner_key,
                    std::string_view release_id);
  // One EVALSHA of lua/abandon.lua on `conn` for the acquire of `name` by `owner_key` with
  // `waiter_id` (what abandon() and barrier_abandon() send); `silent_pending`: leave the
  // waiter's gone mark. Throws Error on transport failure.
  Reply run_abandon(Connection& conn, std::string_view name, std::string_view waiter_id,
                    std::string_view owner_key, LockMode mode, std::chrono::milliseconds lease,
                    bool silent_pending);
  // How long a release latch or a gone mark is kept: longer than a request can take to reach
  // the server after its sender stopped waiting for it.
  std::string latch_ttl() const;

  const RedisOptions options_;
  Capabilities caps_;
  ConnectionPool pool_;
  std::unique_ptr<Scripts> scripts_;
  std::string marker_;      // dataset_marker(prefix)
  std::string grace_text_;  // the pause after data loss, in ms
  std::mutex wait_mu_;
  std::vector<std::unique_ptr<Connection>> idle_waits_;  // guarded by wait_mu_
  std::unordered_set<std::string> busy_names_;           // guarded by wait_mu_
  bool client_reply_allowed_ = false;                     // CLIENT REPLY (ACL)
  std::mutex undo_mu_;
  std::condition_variable undo_cv_;
  std::deque<Undo> undos_;  // guarded by undo_mu_
  bool stopping_ = false;   // guarded by undo_mu_
  std::thread undo_thread_;  // started with the first Undo
};

}  // namespace dlock::redis
