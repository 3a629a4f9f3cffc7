#include "pg_backend.h"

#include <cstdlib>
#include <map>

#include "acquisition.h"
#include "errors.h"

namespace dlock::postgres {
namespace {

using Clock = spi::HeldLock::Clock;

int backend_pid(PgConn& c, Clock::time_point deadline) {
  ResultPtr r = c.query_simple("SELECT pg_backend_pid()", "checking for a pooler", deadline);
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    throw translate_error(c.where(), "checking for a pooler", c.raw(), r.get());
  }
  return std::atoi(PQgetvalue(r.get(), 0, 0));
}

// A lost hold's session is in doubt when it has not answered for so long that the server may
// already have ended it (its estimate ran out) or a statement on it timed out unanswered:
// an unlock sent there may never arrive, so release() closes it instead.
bool in_doubt(const PgHeldLock& hold, const PgConn& c) noexcept {
  return c.in_flight() || Clock::now() >= hold.server_expiry();
}

}  // namespace

bool transaction_pooler_detected(int first_pid, int second_pid) noexcept { return first_pid != second_pid; }

PgHeldLock::PgHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
                       Clock::time_point server_expiry, std::shared_ptr<Session> session,
                       std::int64_t key, std::weak_ptr<SessionPool> pool)
    : HeldLock(std::move(name), mode, std::move(owner_key), token, server_expiry),
      session_(std::move(session)),
      key_(key),
      pool_(std::move(pool)) {}

PgHeldLock::~PgHeldLock() {
  if (released.load() || session_->dead.load()) return;
  if (auto pool = pool_.lock()) pool->unlock_later(session_, key_, mode() == LockMode::shared);
}

PgBackend::PgBackend(PgOptions options) {
  caps_.reentrant = true;
  caps_.read_write = true;
  caps_.fair = true;
  caps_.fencing = true;
  caps_.push_wakeup = true;
  caps_.liveness = Liveness::session;
  caps_.max_name_bytes = 1024;
  caps_.default_lease = options.session_timeout;
  caps_.lost_signal_bound = options.session_timeout;
  caps_.crash_release_bound = options.session_timeout;

  const AdvisorySql sql(options.schema, options.table);
  // The first connection: errors in the URI, the password or pg_hba surface here.
  auto conn = PgConn::open(options, options.application_name);
  // command_timeout bounds each statement (README.md), not the four of them together: over a
  // slow link (50 ms each way) they take four round trips.
  const auto deadline = [&] { return Clock::now() + options.command_timeout; };
  const int first = backend_pid(*conn, deadline());
  const int second = backend_pid(*conn, deadline());
  if (transaction_pooler_detected(first, second)) {
    throw Error(ErrorCode::invalid_argument,
                options.where + ": advisory mode needs a server session, but two transactions ran "
                                "on different server processes (a transaction pooler such as "
                                "PgBouncer pool_mode=transaction?): use mode=lease");
  }
  if (options.create_tables) {
    try {
      conn->exec_simple(sql.create_table, "creating the owner table and token sequence", deadline());
    } catch (const Error& e) {
      // Two clients creating the table at once: one of them sees a duplicate type or table.
      const std::string m = e.message();
      if (m.find("already exists") == std::string::npos && m.find("23505") == std::string::npos &&
          m.find("duplicate key") == std::string::npos) {
        throw;
      }
    }
  }
  conn->exec_simple(sql.prepare_all, "preparing statements", deadline());
  pool_ = std::make_shared<SessionPool>(std::move(options), sql.prepare_all);
  pool_->add(std::make_shared<Session>(std::move(conn)));
}

PgBackend::~PgBackend() = default;

Clock::time_point PgBackend::expiry_after(Clock::time_point sent) const noexcept {
  const auto s = options().session_timeout;
  // The same drift allowance as backends/redis: 1 % of S plus 2 ms.
  return sent + s - s / 100 - std::chrono::milliseconds(2);
}

std::unique_ptr<spi::Acquisition> PgBackend::begin_acquire(const spi::AttemptRequest& request,
                                                           std::function<void()> wake) {
  return std::make_unique<PgAcquisition>(*this, request, std::move(wake));
}

bool PgBackend::release(spi::HeldLock& lock) {
  auto& hold = static_cast<PgHeldLock&>(lock);
  if (hold.released.exchange(true)) return false;
  const auto& s = hold.session();
  const auto& o = options();
  bool was_held = false;
  bool closed = false;
  {
    SessionUse use(*s);
    PgConn* c = s->conn();
    if (c == nullptr) {
      closed = true;
    } else if (lock.lost() && in_doubt(hold, *c)) {
      s->close_locked();  // the server must forget the hold, and only closing is sure to
      closed = true;
    } else {
      // Held, or given up on the client's timer (explicit lease, max_hold) on a session that
      // still answers: unlock this key only. The session's other holds are not in doubt.
      // Any failure closes the session instead, which frees the lock for certain (and marks
      // this hold lost with the others): not held any more, whatever the unlock did. Saying
      // "could not tell" (unavailable) would have the core keep a hold the server has dropped.
      try {
        const auto deadline = Clock::now() + o.command_timeout;
        c->send_prepared(lock.mode() == LockMode::shared ? stmt::unlock_s : stmt::unlock_x,
                         hold.key(), nullptr, "release", deadline);
        ResultPtr r = c->wait_result(deadline, "release");
        if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
          s->close_locked();  // an error, or FATAL: the server ended the session itself
        } else {
          // A hold already given up is not held any more, whatever the server says.
          was_held = parse_unlock_row(r.get()) && !lock.lost();
        }
      } catch (const Error&) {
        s->close_locked();  // broken, or no answer within command_timeout
      }
      closed = s->conn() == nullptr;
    }
  }
  s->holds.remove(lock);
  pool_->unreserve(*s, hold.key());
  if (closed) pool_->forget(s);
  return was_held;
}

void PgBackend::extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds,
                            std::span<spi::RenewStatus> out) noexcept {
  const auto& o = options();
  std::map<Session*, std::vector<std::size_t>> by_session;
  for (std::size_t i = 0; i < locks.size(); ++i) {
    auto* hold = static_cast<PgHeldLock*>(locks[i]);
    if (hold->lost() || hold->session()->dead.load()) {
      out[i] = spi::RenewStatus::not_held;
    } else {
      by_session[hold->session().get()].push_back(i);
    }
  }
  for (auto& [raw, indexes] : by_session) {
    auto session = static_cast<PgHeldLock*>(locks[indexes.front()])->session();
    spi::RenewStatus status = spi::RenewStatus::failed;
    Clock::time_point sent;
    bool killed = false;
    {
      SessionUse use(*session);
      PgConn* c = session->conn();
      if (c == nullptr) {
        status = spi::RenewStatus::not_held;
      } else {
        try {
          sent = Clock::now();
          const auto deadline = sent + o.command_timeout;
          c->send_ping("probe", deadline);
          (void)c->wait_result(deadline, "probe");
          status = spi::RenewStatus::renewed;
        } catch (const Error&) {
          if (!c->ok()) {
            session->close_locked();
            killed = true;
            status = spi::RenewStatus::not_held;
          }  // else timed out: the probe stays in flight; the core retries until S runs out
        }
      }
    }
    if (killed) pool_->forget(session);
    if (status == spi::RenewStatus::renewed) {
      const auto expiry = expiry_after(sent);
      session->holds.refresh(expiry);
      for (auto i : indexes) locks[i]->set_server_expiry(expiry);
    }
    for (auto i : indexes) out[i] = status;
  }
}

}  // namespace dlock::postgres
