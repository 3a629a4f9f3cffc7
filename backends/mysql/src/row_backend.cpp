#include "row_backend.h"

#include <cppconn/exception.h>

#include <future>
#include <thread>

#include "errors.h"
#include "row_acquisition.h"

namespace dlock::mysql {
namespace {

using Clock = std::chrono::steady_clock;

const Batch kProbe{"DO 1", 1};
const Batch kRollback{"ROLLBACK", 1};

// Whether `table` has mode=lease's owner column (it is then not a mode=row table).
bool has_owner_column(Connection& conn, const std::string& table) {
  try {
    conn.run({"SELECT owner FROM `" + table + "` LIMIT 0", 1});
    return true;
  } catch (const sql::SQLException&) {
    return false;
  }
}

}  // namespace

Clock::time_point Shared::expiry_from(Clock::time_point sent) const {
  const auto s = options.session_timeout;
  return sent + s - (s / 100 + std::chrono::milliseconds(2));
}

void Shared::discard(std::shared_ptr<Connection> conn) noexcept {
  if (!conn) return;
  conn->broken = true;
  try {
    std::thread([c = std::move(conn)]() mutable { c.reset(); }).detach();
  } catch (...) {
    // No thread: close inline (COM_QUIT is one small write).
  }
}

Rows run_bounded(const Shared& shared, const std::shared_ptr<Connection>& conn, const Batch& batch,
                 std::function<void()> before_close) {
  const bool short_class = conn->cls() == ConnClass::short_;
  if (short_class && (!before_close || conn->fd() < 0)) return conn->run(batch);
  // A waiter connection (a hold granted by a wait) has no read timeout: the socket is shut
  // down if no answer comes within command_timeout (ReadBound), and the statement runs here.
  // A short one's read timeout would close the socket inside the library: `before_close`
  // could only run after it, so the deadline comes first.
  const auto timed_out = [&] {
    conn->broken = true;
    return Error(ErrorCode::unavailable, shared.options.where + ": no answer within command_timeout");
  };
  std::uint64_t id = 0;  // no statement runs on conn but ours: its fd is open during arm()
  if (conn->fd() >= 0) {
    auto bound = shared.options.command_timeout;
    if (short_class) bound -= bound / 10;
    id = shared.bounds.arm(conn->fd(), Clock::now() + bound, std::move(before_close));
  }
  if (id != 0) {
    try {
      Rows rows = conn->run(batch);
      if (shared.bounds.disarm(id)) throw timed_out();  // answered as the deadline fired
      return rows;
    } catch (const sql::SQLException&) {
      if (shared.bounds.disarm(id)) throw timed_out();
      throw;
    }
  }
  // No deadline (the socket is unknown, or no fd was left for arm()): a short connection's
  // read timeout bounds it; a waiter's statement runs aside, waited for command_timeout.
  if (short_class) return conn->run(batch);
  auto task = std::make_shared<std::packaged_task<Rows()>>([conn, batch] { return conn->run(batch); });
  auto result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(shared.options.command_timeout) != std::future_status::ready) throw timed_out();
  return result.get();
}

RowHeldLock::RowHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
                         Clock::time_point expiry, std::shared_ptr<Connection> conn)
    : HeldLock(std::move(name), mode, std::move(owner_key), token, expiry), conn_(std::move(conn)) {}

RowHeldLock::~RowHeldLock() {
  if (auto c = take_connection()) Shared::discard(std::move(c));
}

std::shared_ptr<Connection> RowHeldLock::take_connection() noexcept {
  std::shared_ptr<Connection> c;
  {
    std::lock_guard lock(mu_);
    c = std::move(conn_);
  }
  return c;
}

std::shared_ptr<Connection> RowHeldLock::connection() const noexcept {
  std::lock_guard lock(mu_);
  return conn_;
}

std::shared_ptr<RowHeldLock> pin_hold(const std::shared_ptr<Shared>& shared,
                                      std::shared_ptr<Connection> conn,
                                      const spi::AttemptRequest& request, std::uint64_t token,
                                      Clock::time_point sent) {
  auto* c = conn.get();
  auto hold = std::make_shared<RowHeldLock>(std::string(request.name), request.mode,
                                            std::string(request.owner_key), token,
                                            shared->expiry_from(sent), std::move(conn));
  c->holds.add(hold);  // the pool's hang-up watch of the connection reaches it from here on
  return hold;
}

RowBackend::RowBackend(MysqlOptions options) : shared_(std::make_shared<Shared>(std::move(options))) {
  const auto& o = shared_->options;
  // A long-class connection: DDL may take longer than command_timeout on a busy server.
  auto conn = shared_->pool.get(ConnClass::long_);
  if (o.mode == Mode::row && conn->version().find("MariaDB") == std::string::npos) {
    throw Error(ErrorCode::unsupported, o.where + ": mode=row needs MariaDB >= 10.3 (its SEQUENCE "
                "is the fencing source); this server is " + conn->version() + ": use mode=lease");
  }
  if (conn->wsrep_on()) {
    throw Error(ErrorCode::unsupported, o.where + ": Galera (wsrep_on=1) is refused: row locks are "
                "certified only at commit, so two nodes could grant the same lock");
  }
  // Look before creating: CREATE … IF NOT EXISTS waits for the metadata lock that every
  // open hold keeps on the table, so a provider opening while locks are held would block.
  const Batch check{"ROLLBACK;SELECT 1 FROM `" + o.table + "` LIMIT 0;SELECT NEXTVAL(`" + o.table +
                        "_seq`) FROM DUAL WHERE 0",
                    3};
  try {
    try {
      conn->run(check);
    } catch (const sql::SQLException& e) {
      // The table without its sequence: a DBA dropped it or ran part of schema.sql (created
      // like a missing table), or the table is mode=lease's (never given a sequence).
      const int missing = e.getErrorCode();
      if (missing == code::unknown_sequence && has_owner_column(*conn, o.table)) {
        throw Error(ErrorCode::invalid_argument,
                    o.where + ": table " + o.table + " is a mode=lease table (it has an owner column): "
                    "give mode=lease, or a mode=row table (backends/mysql/schema.sql)");
      }
      if (!o.create_tables || (missing != code::no_such_table && missing != code::unknown_sequence)) throw;
      const Rows now = conn->run({"SELECT CAST(UNIX_TIMESTAMP(NOW(6))*1000000 AS UNSIGNED)", 1});
      const std::uint64_t start = std::stoull(now.at(0).at(0).value_or("1"));
      try {
        conn->run(create_tables_batch(o.table, start));
      } catch (const sql::SQLException& denied) {
        if (denied.getErrorCode() == code::command_denied || denied.getErrorCode() == code::db_access_denied) {
          throw Error(ErrorCode::invalid_argument,
                      o.where + ": cannot create table " + o.table + " (" + denied.what() +
                          "): the user needs the CREATE privilege on " + o.database +
                          ", or a DBA runs backends/mysql/schema.sql and the URI says create_tables=false");
        }
        throw;
      }
      conn->run(check);
    }
  } catch (const sql::SQLException& e) {
    // Only a missing table or sequence is the DBA's to fix; read-only, lost connections and
    // the like are reported as what they are.
    if (e.getErrorCode() != code::no_such_table && e.getErrorCode() != code::unknown_sequence) {
      throw translate_error(o.where, "checking the lock table", e);
    }
    throw Error(ErrorCode::invalid_argument,
                o.where + ": the lock table " + o.table + " or its sequence " + o.table +
                    "_seq is missing or not usable (" + e.what() + ", error " +
                    std::to_string(e.getErrorCode()) +
                    "): run backends/mysql/schema.sql or allow create_tables");
  }
  shared_->pool.put(std::move(conn));

  const auto s = std::chrono::duration_cast<std::chrono::milliseconds>(o.session_seconds());
  caps_.reentrant = true;
  caps_.read_write = true;
  caps_.fair = true;
  caps_.fencing = true;
  caps_.push_wakeup = true;
  caps_.liveness = Liveness::session;
  caps_.max_name_bytes = 1024;
  caps_.default_lease = s;
  caps_.lost_signal_bound = s;
  caps_.crash_release_bound = s;
}

std::unique_ptr<spi::Acquisition> RowBackend::begin_acquire(const spi::AttemptRequest& request,
                                                            std::function<void()> wake) {
  return std::make_unique<RowAcquisition>(shared_, request, std::move(wake));
}

bool RowBackend::release(spi::HeldLock& lock) {
  auto& hold = static_cast<RowHeldLock&>(lock);
  auto conn = hold.take_connection();
  if (!conn) return false;
  conn->holds.remove(hold);
  std::unique_lock guard(conn->mu, std::defer_lock);
  if (conn->broken || hold.lost() || !guard.try_lock_for(shared_->options.command_timeout)) {
    Shared::discard(std::move(conn));  // a dead or doubtful session: closing frees the row
    return false;
  }
  try {
    run_bounded(*shared_, conn, kRollback);
    conn->dirty = false;
    guard.unlock();
    shared_->pool.put(std::move(conn));
    return true;
  } catch (const sql::SQLException& e) {
    const bool dead = connection_lost(e);
    if (guard.owns_lock()) guard.unlock();
    Shared::discard(std::move(conn));
    // A session that was already gone had lost the lock; otherwise closing it released it.
    return !dead;
  } catch (const Error&) {
    if (guard.owns_lock()) guard.unlock();
    Shared::discard(std::move(conn));
    return true;
  }
}

void RowBackend::extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds,
                             std::span<spi::RenewStatus> out) noexcept {
  for (std::size_t i = 0; i < locks.size(); ++i) {
    auto* hold = static_cast<RowHeldLock*>(locks[i]);
    auto conn = hold->connection();
    if (!conn || conn->broken || hold->lost()) {
      hold->mark_lost();
      out[i] = spi::RenewStatus::not_held;
      continue;
    }
    std::unique_lock guard(conn->mu, std::defer_lock);
    if (!guard.try_lock_for(shared_->options.command_timeout)) {
      out[i] = spi::RenewStatus::failed;
      continue;
    }
    const auto sent = Clock::now();
    // A probe given up closes or shuts down the socket, and the server may grant the row as
    // soon as it reads the FIN: the hold is lost before that (run_bounded's before_close).
    const auto lose = [conn] {
      conn->broken = true;
      conn->holds.mark_all_lost();
    };
    try {
      run_bounded(*shared_, conn, kProbe, lose);
      hold->set_server_expiry(shared_->expiry_from(sent));
      out[i] = spi::RenewStatus::renewed;
    } catch (const sql::SQLException& e) {
      if (connection_lost(e)) {
        lose();
        out[i] = spi::RenewStatus::not_held;
      } else {
        out[i] = spi::RenewStatus::failed;
      }
    } catch (...) {
      // No answer in time: lost if the socket was given up, else (a socket we cannot shut
      // down, left open: the server still holds the row) failed.
      out[i] = hold->lost() ? spi::RenewStatus::not_held : spi::RenewStatus::failed;
    }
  }
}

}  // namespace dlock::mysql
