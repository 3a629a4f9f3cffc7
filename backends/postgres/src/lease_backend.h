// LeaseBackend: mode=lease — lease rows on the server clock (lease_sql.h) for setups where a
// server session cannot be kept (PgBouncer transaction pooling). Acquire and release are one
// durable statement each; renewals of many locks share one round trip; releases NOTIFY the
// name's waiters (listener.h). Not fair: waiters race when woken.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "connection.h"
#include "dlock/spi/backend.h"
#include "lease_sql.h"
#include "listener.h"
#include "options.h"

namespace dlock::postgres {

class LeaseHeldLock : public spi::HeldLock {
 public:
  LeaseHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
                Clock::time_point server_expiry, std::string identity);
  const std::string& identity() const noexcept { return identity_; }

 private:
  const std::string identity_;
};

class LeaseBackend : public spi::Backend, public std::enable_shared_from_this<LeaseBackend> {
 public:
  // Connects once (bad URI, password, database fail here), creates the table if asked and
  // starts the listener.
  explicit LeaseBackend(PgOptions options);
  ~LeaseBackend() override;

  const Capabilities& capabilities() const noexcept override { return caps_; }
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  // Owner-checked release (1 round trip + commit), with a NOTIFY for the name's waiters.
  // A hold already marked lost is left to expire (false, nothing sent).
  bool release(spi::HeldLock& lock) override;
  // One multi-statement round trip per batch: an owner-checked UPDATE per lock.
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

  // Runs `sql` with text parameters on a pooled connection; returns its result (error
  // results are thrown translated). Sets `sent` to the send time.
  ResultPtr run(const std::string& sql, const std::vector<std::string>& params, std::string_view doing,
                spi::HeldLock::Clock::time_point* sent = nullptr);

  const PgOptions& options() const noexcept { return options_; }
  const LeaseSql& sql() const noexcept { return sql_; }
  Listener& listener() noexcept { return *listener_; }
  spi::HeldLock::Clock::time_point expiry_after(spi::HeldLock::Clock::time_point sent,
                                                std::chrono::milliseconds lease) const noexcept;

 private:
  std::unique_ptr<PgConn> take();
  void give(std::unique_ptr<PgConn> conn);
  void drop_idle();

  const PgOptions options_;
  const LeaseSql sql_;
  Capabilities caps_;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<PgConn>> idle_;  // guarded by mu_
  std::size_t open_ = 0;                        // guarded by mu_
  std::unique_ptr<Listener> listener_;
};

}  // namespace dlock::postgres
