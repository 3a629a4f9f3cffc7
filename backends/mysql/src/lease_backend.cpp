#include "lease_backend.h"

#include <cppconn/exception.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "errors.h"
#include "keys.h"
#include "lease_sql.h"

namespace dlock::mysql {
namespace {

using Clock = std::chrono::steady_clock;

// Waiters poll: a release is seen within this long (a holder that dies is seen when its
// TTL runs out: Busy::retry_after bounds the sleep by it).
constexpr std::chrono::milliseconds kPoll{25};
constexpr std::size_t kRenewChunk = 100;

// An acquire batch sent without an answer may still run on the server and take the row for
// this acquisition's owner key. Granted later (a retry, the next attempt of a wait, which
// answers "ours" for that row), the hold is the caller's; never granted, the row is cleared
// behind those sessions when the acquisition ends (nothing else uses its owner key).
class LeaseAcquisition final : public spi::Acquisition {
 public:
  LeaseAcquisition(LeaseBackend& backend, const spi::AttemptRequest& request)
      : backend_(backend), request_(request), key_hex_(row_key_hex(backend.options().prefix, request.name)) {}
  ~LeaseAcquisition() override {
    if (in_doubt_.empty()) return;
    const auto lease =
        request_.lease.count() > 0 ? request_.lease : backend_.options().session_timeout;
    backend_.clear_lost(key_hex_, request_.owner_key, std::move(in_doubt_), lease);
  }
  spi::Attempt attempt() override {
    spi::Attempt a = backend_.attempt(request_, key_hex_, in_doubt_);
    if (std::holds_alternative<std::shared_ptr<spi::HeldLock>>(a)) in_doubt_.clear();
    return a;
  }
  std::chrono::milliseconds fallback_poll() const noexcept override { return kPoll; }

 private:
  LeaseBackend& backend_;
  const spi::AttemptRequest& request_;
  const std::string key_hex_;
  std::vector<SessionRef> in_doubt_;  // sessions an acquire batch was sent on, unanswered
};

Clock::time_point expiry_from(Clock::time_point sent, std::chrono::milliseconds lease) {
  return sent + lease - (lease / 100 + std::chrono::milliseconds(2));
}

}  // namespace

LeaseHeldLock::LeaseHeldLock(std::string name, std::string owner_key, std::uint64_t token,
                             Clock::time_point expiry, std::string key_hex, std::string owner_hex)
    : HeldLock(std::move(name), LockMode::exclusive, std::move(owner_key), token, expiry),
      key_hex_(std::move(key_hex)),
      owner_hex_(std::move(owner_hex)) {}

template <class F>
auto LeaseBackend::with_connection(const char* doing, F&& f) {
  auto conn = pool_.get(ConnClass::short_);
  bool fresh = conn->last_used + std::chrono::milliseconds(1) > Clock::now();
  for (;;) {
    try {
      auto result = f(*conn);
      pool_.put(std::move(conn));
      return result;
    } catch (const sql::SQLException& e) {
      conn->broken = true;
      if (connection_lost(e) && !fresh) {  // a cached connection the server had closed
        conn.reset();  // before its replacement opens (it may reuse the socket's number)
        conn = pool_.get(ConnClass::short_);
        fresh = true;
        continue;
      }
      throw translate_error(options_.where, doing, e);
    }
  }
}

LeaseBackend::LeaseBackend(MysqlOptions options)
    : options_(std::move(options)), pool_(options_), cleaner_(options_, pool_) {
  const auto& o = options_;
  auto conn = pool_.get(ConnClass::long_);
  if (conn->wsrep_on()) {
    throw Error(ErrorCode::unsupported, o.where + ": Galera (wsrep_on=1) is refused");
  }
  // The write checks the server takes writes from us (read_only=1 refuses it with 1290
  // before looking for rows): every acquire writes, so a read-only server fails here.
  const Batch check{"SELECT 1 FROM `" + o.table + "` LIMIT 0;UPDATE `" + o.table + "` SET owner=owner WHERE 0", 2};
  try {
    try {
      conn->run(check);
    } catch (const sql::SQLException& e) {
      if (!o.create_tables || e.getErrorCode() != code::no_such_table) throw;
      try {
        conn->run(lease_create_table_batch(o.table));
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
    if (e.getErrorCode() == code::unknown_column) {
      throw Error(ErrorCode::invalid_argument,
                  o.where + ": table " + o.table + " has no lease columns (" + e.what() +
                      "): it is a mode=row table? give mode=row, or a mode=lease table "
                      "(backends/mysql/schema.sql)");
    }
    if (e.getErrorCode() != code::no_such_table) throw translate_error(o.where, "checking the lease table", e);
    throw Error(ErrorCode::invalid_argument,
                o.where + ": the lease table " + o.table + " is missing or not usable (" + e.what() +
                    "): run backends/mysql/schema.sql or allow create_tables");
  }
  pool_.put(std::move(conn));
  caps_.reentrant = true;
  caps_.read_write = false;
  caps_.fair = false;
  caps_.fencing = true;
  caps_.push_wakeup = false;
  caps_.liveness = Liveness::lease;
  caps_.max_name_bytes = 1024;
  caps_.default_lease = o.session_timeout;
  caps_.lost_signal_bound = o.session_timeout;
  caps_.crash_release_bound = o.session_timeout;
}

std::unique_ptr<spi::Acquisition> LeaseBackend::begin_acquire(const spi::AttemptRequest& request,
                                                              std::function<void()>) {
  return std::make_unique<LeaseAcquisition>(*this, request);
}

void LeaseBackend::clear_lost(const std::string& key_hex, std::string_view owner_key,
                              std::vector<SessionRef> in_doubt,
                              std::chrono::milliseconds lease) noexcept {
  try {
    cleaner_.queue(LostAcquire{key_hex, to_hex(owner_key), std::move(in_doubt), lease});
  } catch (...) {
    // No memory: the row runs out at its lease.
  }
}

spi::Attempt LeaseBackend::attempt(const spi::AttemptRequest& request, const std::string& key_hex,
                                   std::vector<SessionRef>& in_doubt) {
  const auto lease = request.lease.count() > 0 ? request.lease : options_.session_timeout;
  const std::string owner_hex = to_hex(request.owner_key);
  // Taken once a connection is in hand: opening one may take several round trips.
  Clock::time_point sent;
  Rows rows;
  try {
    rows = with_connection("acquiring a lease", [&](Connection& c) {
      sent = Clock::now();
      try {
        return c.run(
            lease_acquire_batch(options_.table, key_hex, to_hex(request.name), owner_hex, lease));
      } catch (const sql::SQLException& e) {
        // No answer (a read timeout, a broken connection): the server may run it later.
        if (connection_lost(e)) in_doubt.push_back({c.id(), c.session_host()});
        throw;
      }
    });
  } catch (const Error& e) {
    // 1205: another client is updating the row this instant: busy, look again soon.
    if (e.message().find("error 1205") != std::string::npos) return spi::Busy{kPoll};
    throw;
  }
  if (rows.size() != 1 || rows[0].size() != 3 || !rows[0][0] || !rows[0][1] || !rows[0][2]) {
    throw Error(ErrorCode::internal, options_.where + ": unexpected answer to the lease statement");
  }
  if (*rows[0][0] == "1") {
    return std::make_shared<LeaseHeldLock>(std::string(request.name), std::string(request.owner_key),
                                           std::stoull(*rows[0][1]), expiry_from(sent, lease), key_hex,
                                           owner_hex);
  }
  // The holder's remaining TTL bounds how long we sleep: a dead holder's lease is taken
  // over as soon as it runs out.
  const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::microseconds(std::stoll(*rows[0][2])));
  return spi::Busy{std::max(ttl, std::chrono::milliseconds(1))};
}

bool LeaseBackend::release(spi::HeldLock& lock) {
  auto& hold = static_cast<LeaseHeldLock&>(lock);
  // A hold given up (lost) or past our estimate of its end is not ours to count on, and
  // freeing it now would hand the lock on before the lease the server promised ran out:
  // let the server expire it (as backends/redis does).
  if (hold.lost() || hold.server_expiry() <= Clock::now()) return false;
  // The server runs an UPDATE already in its socket once it answers again, even when we
  // closed the connection meanwhile: an UPDATE whose connection was lost (no answer within
  // command_timeout, or the connection broke) may have freed the lock, and another client
  // may take it at once. So the hold is marked lost right there (before any retry) and the
  // answer is false: not held any more, whatever the UPDATE did (the row was cleared, or
  // it runs out at its own expiry). Only a failure before anything was sent throws, and a
  // statement the server refused (1205: the row is being updated) leaves the hold as it was.
  const Batch batch =
      lease_release_batch(options_.table, hold.key_hex(), hold.owner_hex(), hold.fencing_token());
  bool doubt = false;
  try {
    const Rows rows = with_connection("releasing a lease", [&](Connection& c) {
      try {
        return c.run(batch);
      } catch (const sql::SQLException& e) {
        if (connection_lost(e) && !doubt) {
          doubt = true;
          hold.set_server_expiry(Clock::now());
          hold.mark_lost();
        }
        throw;
      }
    });
    return !doubt && rows.size() == 1 && !rows[0].empty() &&
           rows[0][0] == std::optional<std::string>("1");
  } catch (const Error&) {
    if (doubt) return false;
    throw;
  }
}

void LeaseBackend::extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                               std::span<spi::RenewStatus> out) noexcept {
  for (std::size_t begin = 0; begin < locks.size(); begin += kRenewChunk) {
    const std::size_t end = std::min(locks.size(), begin + kRenewChunk);
    std::vector<LeaseRef> refs;
    for (std::size_t i = begin; i < end; ++i) {
      auto* h = static_cast<LeaseHeldLock*>(locks[i]);
      refs.push_back({h->key_hex(), h->owner_hex(), h->fencing_token()});
    }
    Clock::time_point sent;
    try {
      const Rows rows = with_connection("renewing leases", [&](Connection& c) {
        sent = Clock::now();
        return c.run(lease_renew_batch(options_.table, refs, lease));
      });
      std::map<std::string, bool> renewed;
      for (const auto& r : rows) {
        if (r.size() != 2 || !r[0] || !r[1]) continue;
        std::string k = *r[0];
        std::transform(k.begin(), k.end(), k.begin(), [](unsigned char ch) { return std::tolower(ch); });
        renewed[k + ":" + *r[1]] = true;
      }
      for (std::size_t i = begin; i < end; ++i) {
        auto* h = static_cast<LeaseHeldLock*>(locks[i]);
        if (renewed.count(h->key_hex() + ":" + std::to_string(h->fencing_token())) != 0) {
          h->set_server_expiry(expiry_from(sent, lease));
          out[i] = spi::RenewStatus::renewed;
        } else {
          out[i] = spi::RenewStatus::not_held;
        }
      }
    } catch (...) {
      for (std::size_t i = begin; i < end; ++i) out[i] = spi::RenewStatus::failed;
    }
  }
}

}  // namespace dlock::mysql
