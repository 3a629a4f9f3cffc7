// PgBackend: PostgreSQL session advisory locks behind postgres:// providers (the core adds
// reentrancy, the wait loop and the session probes). See backends/postgres/README.md.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "dlock/spi/backend.h"
#include "options.h"
#include "session_pool.h"
#include "sql.h"

namespace dlock::postgres {

// A granted hold: the advisory lock `key` on `session`, which it keeps open.
class PgHeldLock : public spi::HeldLock {
 public:
  PgHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
             Clock::time_point server_expiry, std::shared_ptr<Session> session, std::int64_t key,
             std::weak_ptr<SessionPool> pool);
  // Never blocks: a hold dropped without release is unlocked by the monitor thread.
  ~PgHeldLock() override;

  const std::shared_ptr<Session>& session() const noexcept { return session_; }
  std::int64_t key() const noexcept { return key_; }
  // Set once release() has dealt with the hold (released, or found lost).
  std::atomic<bool> released{false};

 private:
  const std::shared_ptr<Session> session_;
  const std::int64_t key_;
  const std::weak_ptr<SessionPool> pool_;
};

// Thread safety: every method may be called concurrently.
class PgBackend : public spi::Backend {
 public:
  // Connects once (so a bad URI, password, database or pg_hba rule fails here), refuses a
  // transaction pooler (advisory locks need a server session: mode=lease), creates the
  // fence table if asked, and prepares the statements.
  explicit PgBackend(PgOptions options);
  ~PgBackend() override;

  const Capabilities& capabilities() const noexcept override { return caps_; }
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  // pg_advisory_unlock[_shared] on the hold's session (1 round trip), also for a hold the
  // core gave up on its own timer (explicit lease, max_hold): the session's other holds stay.
  // A lost hold whose session is in doubt (its estimate ran out, or a statement on it timed
  // out unanswered) has its session closed instead (the server must forget it). An unlock
  // that fails or gets no answer within command_timeout closes the session too, which marks
  // every hold on it lost (this one included) before the close is sent. A lost hold answers
  // false. Never throws: whatever happens, the hold is not held afterwards.
  bool release(spi::HeldLock& lock) override;
  // One empty query per distinct session (not per hold), each bounded by command_timeout.
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

  const PgOptions& options() const noexcept { return pool_->options(); }
  const std::shared_ptr<SessionPool>& pool() const noexcept { return pool_; }
  // The estimate of the server-side end of a hold whose session answered a request sent at `sent`.
  spi::HeldLock::Clock::time_point expiry_after(spi::HeldLock::Clock::time_point sent) const noexcept;

 private:
  Capabilities caps_;
  std::shared_ptr<SessionPool> pool_;
};

// True when two pg_backend_pid() answers from two transactions differ: a transaction
// pooler (PgBouncer pool_mode=transaction) sits between client and server.
bool transaction_pooler_detected(int first_pid, int second_pid) noexcept;

}  // namespace dlock::postgres
