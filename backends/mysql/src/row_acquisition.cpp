#include "row_acquisition.h"

#include <cppconn/exception.h>
#include <fcntl.h>

#include <thread>

#include "errors.h"
#include "keys.h"

namespace dlock::mysql {
namespace {

using Clock = std::chrono::steady_clock;
using Phase = WaitState::Phase;

std::uint64_t parse_token(const Rows& rows, const MysqlOptions& o) {
  if (rows.size() != 1 || rows[0].empty() || !rows[0][0]) {
    throw Error(ErrorCode::internal, o.where + ": the lock statement returned no token");
  }
  return std::stoull(*rows[0][0]);
}

// Sends KILL QUERY <id> from an idle cached connection or a new one outside the pool cap (a
// give-up must not wait for a slot: the waiter it kills may hold the last one). Blocks up to
// connect_timeout + command_timeout: run it off the caller's thread. False if not sent.
bool kill_query(Shared& shared, std::uint64_t id) noexcept {
  try {
    auto conn = shared.pool.get_outside_cap(ConnClass::short_);
    conn->run({"KILL QUERY " + std::to_string(id), 1});
    shared.pool.put(std::move(conn));  // dropped if it was opened outside the cap
    return true;
  } catch (...) {
    return false;
  }
}

const Batch kRollback{"ROLLBACK", 1};

// A waiter's statement waits this long on the server (a year): it ends by a grant, a KILL
// QUERY or a closed connection, never by running out, so the waiter keeps its queue place.
constexpr Wait kWaitUntilGranted{std::chrono::hours(24 * 365)};

// Repeats KILL QUERY <id> until the wait of `st` ends (a KILL may reach the connection before
// its statement starts, or not at all while the server stalls). If it has not ended after
// command_timeout, the waiter's socket is shut down, which fails its read at once (closing
// the connection ends the wait on the server). Gives up after wait_chunk + 2 command_timeout
// (the socket unknown and the server unreachable: TCP keepalive ends the wait). The deadline
// is armed under st->mu on the waiter's own reference to the socket (st->socket), never on
// the connection's fd number: Connector/C may have closed that inside the statement (the
// server closed the connection) and the number may name another socket by now.
void kill_until_finished(const std::shared_ptr<Shared>& shared, const std::shared_ptr<WaitState>& st,
                         std::uint64_t id) {
  const auto& o = shared->options;
  const auto give_up = Clock::now() + o.wait_chunk + 2 * o.command_timeout;
  std::unique_lock lock(st->mu);
  if (!st->finished && !st->answered && st->socket.valid()) {
    st->kill_bound = shared->bounds.arm(st->socket.get(), Clock::now() + o.command_timeout);
  }
  while (!st->finished && !st->answered && Clock::now() < give_up) {
    lock.unlock();
    kill_query(*shared, id);
    lock.lock();
    st->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return st->finished || st->answered; });
  }
  if (st->kill_bound != 0) {
    shared->bounds.disarm(st->kill_bound);
    st->kill_bound = 0;
  }
}

// The waiter thread lets go of its connection's wait: no more KILL QUERY for it, and the
// give-up's deadline on its socket is disarmed. True if that deadline had fired (the socket
// is shut down: the connection is unusable). REQUIRES: st.mu held.
bool let_go_locked(Shared& shared, WaitState& st) {
  st.answered = true;
  st.cv.notify_all();  // the kill thread stops
  st.socket.reset();   // no more arming (answered): a socket the library closed ends here
  if (st.kill_bound == 0) return false;
  const bool fired = shared.bounds.disarm(st.kill_bound);
  st.kill_bound = 0;
  return fired;
}

// Ends the transaction of a given-up waiter connection (a grant that raced with the give-up,
// or the row an interrupted wait still counts) before returning, so that nothing of the
// waiter is left on the server once the acquire has returned: ROLLBACK within
// command_timeout (run_bounded), then the connection goes back to the cache. Without
// `rollback` (the connection is dead or its socket shut down), or if the ROLLBACK fails, the
// connection is closed here, on this thread: the server rolls back as soon as it reads that.
void end_transaction(Shared& shared, std::shared_ptr<Connection> conn, bool rollback) noexcept {
  if (rollback) {
    try {
      run_bounded(shared, conn, kRollback);
      conn->dirty = false;
      shared.pool.put(std::move(conn));
      return;
    } catch (...) {
    }
  }
  conn->broken = true;
  conn.reset();  // the last reference (unless run_bounded's helper thread still runs on it)
}

// An abandoned waiter thread's last steps: its transaction ended (end_transaction), then the
// acquisition, which waits for `finished`, is told.
void finish_abandoned(Shared& shared, const std::shared_ptr<WaitState>& st,
                      std::shared_ptr<Connection> conn, bool rollback) {
  bool fired = false;
  {
    std::lock_guard lock(st->mu);
    fired = let_go_locked(shared, *st);
  }
  end_transaction(shared, std::move(conn), rollback && !fired);
  WaiterThreads::finishing();
  std::lock_guard lock(st->mu);
  st->phase = Phase::done;
  st->finished = true;
  st->cv.notify_all();
}

// The waiter thread: blocks in InnoDB's queue, in one statement, until granted, failed or
// abandoned.
void wait_loop(const std::shared_ptr<Shared>& shared, const std::shared_ptr<WaitState>& st,
               const std::string& key_hex, const std::string& name_hex, LockMode mode) {
  const auto& o = shared->options;
  auto finish = [&](Phase phase, std::shared_ptr<Connection> conn, bool keep) {
    WaiterThreads::finishing();
    std::lock_guard lock(st->mu);
    let_go_locked(*shared, *st);  // before the connection is closed
    if (phase == Phase::failed && !st->abandoned && st->wake) st->wake();
    if (!st->abandoned || phase != Phase::granted) st->phase = phase;
    st->finished = true;
    st->cv.notify_all();
    if (conn) {
      if (keep) {
        shared->pool.put(std::move(conn));
      } else {
        Shared::discard(std::move(conn));
      }
    }
  };
  std::shared_ptr<Connection> conn;
  try {
    conn = shared->pool.get(ConnClass::waiter);
  } catch (...) {
    finish(Phase::failed, nullptr, false);
    return;
  }
  {
    std::lock_guard lock(st->mu);
    if (st->abandoned) {
      st->finished = true;
      st->cv.notify_all();
      shared->pool.put(std::move(conn));
      return;
    }
    st->conn_id = conn->id();
    // The connection is ours and idle: its fd names its socket now.
    if (conn->fd() >= 0) st->socket.reset(::fcntl(conn->fd(), F_DUPFD_CLOEXEC, 0));
    st->phase = Phase::waiting;
  }
  // The row is missing on a name's first use (the first attempt queues without a NOWAIT
  // try) or when a DBA dropped it: create it and wait again.
  const Batch insert_missing = insert_row_batch(o.table, key_hex, name_hex);
  for (;;) {
    const auto sent = Clock::now();
    try {
      const Rows rows = conn->run(lock_batch(o.table, key_hex, mode, kWaitUntilGranted, conn->dirty));
      conn->dirty = true;
      if (rows.empty()) {
        conn->run(insert_missing);
        conn->dirty = false;
        continue;
      }
      const std::uint64_t token = parse_token(rows, o);
      std::unique_lock lock(st->mu);
      if (st->abandoned) {
        // A grant that raced with the give-up: undone (ROLLBACK) before the acquisition,
        // which waits for `finished`, returns "not acquired"; otherwise another owner's
        // try-once would find the row locked by nobody for a moment.
        lock.unlock();
        finish_abandoned(*shared, st, std::move(conn), true);
        return;
      }
      WaiterThreads::finishing();
      let_go_locked(*shared, *st);
      st->finished = true;
      st->cv.notify_all();
      st->phase = Phase::granted;
      st->conn = std::move(conn);
      st->token = token;
      // wait_timeout counts from the end of the server's last statement, i.e. from the
      // grant, not from when this wait was sent (maybe long ago). The grant happened
      // after `sent` and at most one network delay before we read it; S/10 is allowed for
      // that delay.
      st->sent = std::max(sent, Clock::now() - o.session_timeout / 10);
      if (st->wake) st->wake();
      return;
    } catch (const sql::SQLException& e) {
      conn->dirty = true;
      bool abandoned = false;
      {
        std::lock_guard lock(st->mu);
        abandoned = st->abandoned;
      }
      if (abandoned) {
        // An interrupted wait still counts a locked row in its transaction (and a KILL that
        // arrived just after a grant interrupts a statement whose row is locked): end it
        // before the acquisition returns and the connection goes back to the cache.
        finish_abandoned(*shared, st, std::move(conn), !connection_lost(e));
        return;
      }
      if (e.getErrorCode() == code::lock_wait_timeout) continue;  // a year passed
      finish(Phase::failed, std::move(conn), false);
      return;
    } catch (...) {
      finish(Phase::failed, std::move(conn), false);
      return;
    }
  }
}

}  // namespace

RowAcquisition::RowAcquisition(std::shared_ptr<Shared> shared, const spi::AttemptRequest& request,
                               std::function<void()> wake)
    : shared_(std::move(shared)),
      request_(request),
      wake_(std::move(wake)),
      key_hex_(row_key_hex(shared_->options.prefix, request.name)),
      lock_sql_(prepared_lock_sql(shared_->options.table, request.mode)) {}

RowAcquisition::~RowAcquisition() {
  if (!wait_) return;
  auto st = wait_;
  std::shared_ptr<Connection> granted;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(st->mu);
    st->abandoned = true;
    if (st->phase == Phase::granted) granted = std::move(st->conn);
    if (!st->finished) id = st->conn_id;
  }
  if (granted) {
    // A grant that arrived after the core's last attempt: undone here, one round trip
    // (ROLLBACK within command_timeout), so the row is free once the acquire returns.
    end_transaction(*shared_, std::move(granted), true);
    return;
  }
  if (id == 0) return;  // finished, or still connecting: the thread sees `abandoned` and leaves
  // The KILL needs a connection (a slot, a connect): not on the caller's thread, which
  // must return within its wait plus a round trip. A grant that races with it is undone by
  // the waiter thread (it sees `abandoned`) before it sets `finished`.
  try {
    std::thread([shared = shared_, st, id] { kill_until_finished(shared, st, id); }).detach();
  } catch (...) {
    // No thread (very rare): the wait ends when a grant arrives (undone then) or the
    // connection is found dead.
    return;
  }
  // The round trip: once the KILL has ended the waiter's statement (or a raced grant was
  // rolled back), nothing of this waiter is left on the server to keep another owner out. A
  // server that does not answer gets one command_timeout; the KILL goes on in the background.
  std::unique_lock lock(st->mu);
  st->cv.wait_for(lock, shared_->options.command_timeout, [&] { return st->finished; });
}

std::chrono::milliseconds RowAcquisition::fallback_poll() const noexcept {
  if (!wait_) return std::chrono::milliseconds(25);
  std::lock_guard lock(wait_->mu);
  if (wait_->phase == Phase::failed) return std::chrono::milliseconds(25);
  return std::chrono::hours(24);
}

spi::Attempt RowAcquisition::attempt() {
  if (wait_) {
    std::unique_lock lock(wait_->mu);
    switch (wait_->phase) {
      case Phase::granted: {
        wait_->phase = Phase::consumed;
        auto conn = std::move(wait_->conn);
        const auto token = wait_->token;
        const auto sent = wait_->sent;
        lock.unlock();
        wait_.reset();
        // The grant may have waited here while its connection was cut (a proxy reset, a
        // KILL): the server then freed the row already, so it is no grant. Queue anew.
        if (!conn->hung_up()) return pin_hold(shared_, std::move(conn), request_, token, sent);
        Shared::discard(std::move(conn));
        break;
      }
      case Phase::connecting:
      case Phase::waiting:
        return spi::Busy{};
      default:  // failed: the queue position is lost; try again and queue anew
        lock.unlock();
        wait_.reset();
        break;
    }
  } else if (request_.will_wait && !tried_) {
    // A first attempt that may wait queues at once: the server-side wait answers as soon
    // as the row is free, so a NOWAIT try first would cost two round trips (the try and
    // the ROLLBACK that ends it) on every contended acquire, for no earlier grant.
    tried_ = true;
    start_wait();
    return spi::Busy{};
  }
  tried_ = true;
  auto result = try_now();
  if (std::holds_alternative<spi::Busy>(result) && request_.will_wait) start_wait();
  return result;
}

void RowAcquisition::start_wait() {
  auto st = std::make_shared<WaitState>();
  st->wake = wake_;
  shared_->waiters.run([shared = shared_, st, key = key_hex_, name = to_hex(request_.name), mode = request_.mode] {
    wait_loop(shared, st, key, name, mode);
  });
  wait_ = std::move(st);
}

spi::Attempt RowAcquisition::try_now() {
  const auto& o = shared_->options;
  auto conn = shared_->pool.get(ConnClass::short_);
  bool fresh = conn->last_used + std::chrono::milliseconds(1) > Clock::now();
  for (int round = 0; round < 4; ++round) {
    const auto sent = Clock::now();
    try {
      const Rows rows = conn->run_prepared_lock(lock_sql_, key_hex_);
      conn->dirty = true;
      if (!rows.empty()) return pin_hold(shared_, std::move(conn), request_, parse_token(rows, o), sent);
      // No row for this name yet: create it (once per name, ever) and lock again.
      try {
        conn->run(insert_row_batch(o.table, key_hex_, to_hex(request_.name)));
        conn->dirty = false;
      } catch (const sql::SQLException& e) {
        if (e.getErrorCode() != code::lock_wait_timeout) throw;  // 1205: it exists and is held
      }
    } catch (const sql::SQLException& e) {
      if (e.getErrorCode() == code::lock_wait_timeout) {
        // A refused locking read still counts a locked row in its open transaction
        // (INNODB_TRX trx_rows_locked=1): end it now rather than leave it on an idle
        // connection (one more round trip, on the busy path only).
        try {
          conn->run({"ROLLBACK", 1});
          conn->dirty = false;
          shared_->pool.put(std::move(conn));
        } catch (...) {
          Shared::discard(std::move(conn));
        }
        return spi::Busy{};
      }
      conn->broken = true;
      if (connection_lost(e) && !fresh) {
        // A cached connection the server had closed (restart, wait_timeout): a new one.
        // Closing the old one ends whatever it may have been granted; it is closed before
        // the new one opens (its socket's number is free again, see Connection::fd()).
        conn.reset();
        conn = shared_->pool.get(ConnClass::short_);
        fresh = true;
        continue;
      }
      throw translate_error(o.where, "locking " + std::string(request_.mode == LockMode::shared ? "shared" : "exclusive"), e);
    }
  }
  throw Error(ErrorCode::internal, o.where + ": the row of a lock name keeps disappearing");
}

}  // namespace dlock::mysql
