// RowBackend (mode=row): a real InnoDB row lock per name, held by an open transaction on a
// pinned connection. See backends/mysql/README.md and shared/SESSION_BACKENDS.md §2.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "connection.h"
#include "dlock/spi/backend.h"
#include "fd_monitor.h"
#include "options.h"
#include "pool.h"
#include "read_bound.h"
#include "waiter_threads.h"

namespace dlock::mysql {

// What outlives the backend object while background clean-up still runs.
struct Shared {
  explicit Shared(MysqlOptions o) : options(std::move(o)), pool(options, &monitor) {}
  const MysqlOptions options;
  FdMonitor monitor;  // constructed before the pool, which watches its connections with it
  Pool pool;
  WaiterThreads waiters;
  mutable ReadBound bounds;  // run_bounded()'s deadlines

  // The server-side end of a session that answered a request sent at `sent`:
  // sent + S - (1 % of S + 2 ms), the same drift allowance as backends/redis.
  std::chrono::steady_clock::time_point expiry_from(std::chrono::steady_clock::time_point sent) const;
  // Closes `conn` on a background thread (closing ends its transaction on the server).
  static void discard(std::shared_ptr<Connection> conn) noexcept;
};

// A hold: the pinned connection whose open transaction keeps the row locked.
class RowHeldLock : public spi::HeldLock {
 public:
  RowHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
              Clock::time_point expiry, std::shared_ptr<Connection> conn);
  // Does not block: an unreleased connection is closed on a background thread.
  ~RowHeldLock() override;

  // The pinned connection, taken out for release (null once taken).
  std::shared_ptr<Connection> take_connection() noexcept;
  std::shared_ptr<Connection> connection() const noexcept;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Connection> conn_;  // guarded by mu_
};

// Thread safety: every method may be called concurrently.
class RowBackend : public spi::Backend {
 public:
  // Connects once (a bad password, database or port fails here), refuses anything but
  // MariaDB without Galera, creates the table and sequence unless create_tables=false, and
  // checks the table is there. Throws Error (invalid_argument / unavailable / unsupported).
  explicit RowBackend(MysqlOptions options);
  ~RowBackend() override = default;

  const Capabilities& capabilities() const noexcept override { return caps_; }
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  // ROLLBACK on the pinned connection: true; a dead session: false.
  bool release(spi::HeldLock& lock) override;
  // A `DO 1` probe per pinned connection.
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

  const MysqlOptions& options() const noexcept { return shared_->options; }
  std::size_t open_connections() const { return shared_->pool.open(); }

 private:
  std::shared_ptr<Shared> shared_;
  Capabilities caps_;
};

// Pins `conn` as the hold of `request` (token from the lock statement sent at `sent`):
// registers it with the connection's SessionHolds, which the pool's hang-up watch reaches.
std::shared_ptr<RowHeldLock> pin_hold(const std::shared_ptr<Shared>& shared,
                                      std::shared_ptr<Connection> conn,
                                      const spi::AttemptRequest& request, std::uint64_t token,
                                      std::chrono::steady_clock::time_point sent);

// Runs `batch` on `conn` within command_timeout, on the caller's thread: a short-class
// connection's read timeout bounds it; a long-class one's socket is shut down at the deadline
// (ReadBound; a helper thread if its socket is unknown). On timeout the connection is marked
// broken and Error(unavailable) thrown. Throws sql::SQLException from the server.
// `before_close`, if given, runs before the socket is shut down or closed for want of an
// answer (a probe marks its holds lost there: the server may grant their rows as soon as it
// reads the FIN): on a short connection whose socket is known, the deadline is then armed
// command_timeout/10 before the library's read timeout, which would close the socket
// first. Not called when nothing is closed (a long connection with an unknown socket, left
// open) or nothing can be done first (a short one with an unknown socket).
Rows run_bounded(const Shared& shared, const std::shared_ptr<Connection>& conn, const Batch& batch,
                 std::function<void()> before_close = {});

}  // namespace dlock::mysql
