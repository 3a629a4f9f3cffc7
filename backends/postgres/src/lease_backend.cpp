#include "lease_backend.h"

#include <charconv>

#include "errors.h"
#include "keys.h"

namespace dlock::postgres {
namespace {

using Clock = spi::HeldLock::Clock;

// The row's lease on the server clock: the asked lease plus the drift allowance (1 % + 2 ms).
// The holder's own estimate ends that much before the asked lease, so between the two a
// server clock running up to 1 % fast (a slewing NTP) still never grants a lock to another
// before its holder's lease ran out by the holder's clock.
std::chrono::milliseconds server_lease(std::chrono::milliseconds lease) {
  return lease + lease / 100 + std::chrono::milliseconds(2);
}

std::string bytea_param(std::string_view bytes) { return "\\x" + to_hex(bytes); }

std::optional<long long> int_field(const PGresult* r, int col) {
  if (PQntuples(r) != 1 || PQgetisnull(r, 0, col)) return std::nullopt;
  std::string_view text = PQgetvalue(r, 0, col);
  long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{}) throw Error(ErrorCode::internal, "postgres: a number that is not a number");
  return v;
}

class LeaseAcquisition : public spi::Acquisition {
 public:
  LeaseAcquisition(LeaseBackend& b, const spi::AttemptRequest& r, std::function<void()> wake)
      : b_(b), r_(r), identity_(key_identity(b.options().prefix, r.name)) {
    if (r.will_wait) listen_id_ = b_.listener().add(digest_hex16(identity_), std::move(wake));
  }
  ~LeaseAcquisition() override {
    if (listen_id_) b_.listener().remove(listen_id_);
    if (!intent_ || granted_) return;
    try {  // let readers in at once rather than after writer_intent
      (void)b_.run(b_.sql().give_up, {bytea_param(identity_), bytea_param(r_.owner_key), b_.sql().channel}, "give up");
    } catch (const Error&) {
    }
  }

  spi::Attempt attempt() override {
    const auto lease = r_.lease.count() > 0 ? r_.lease : b_.options().lease;
    const bool shared = r_.mode == LockMode::shared;
    const std::string owner = shared ? to_hex(r_.owner_key) : bytea_param(r_.owner_key);
    Clock::time_point sent;
    std::vector<std::string> params = {bytea_param(identity_), owner, std::to_string(server_lease(lease).count())};
    if (!shared) params.push_back(r_.will_wait ? "true" : "false");
    ResultPtr res = b_.run(shared ? b_.sql().acquire_s : b_.sql().acquire_x, params, "acquire", &sent);
    if (PQnfields(res.get()) != 3) throw Error(ErrorCode::internal, "postgres: unexpected acquire answer");
    if (int_field(res.get(), 2).value_or(0) > 0) intent_ = true;
    if (auto token = int_field(res.get(), 0)) {
      granted_ = true;
      return std::make_shared<LeaseHeldLock>(std::string(r_.name), r_.mode, std::string(r_.owner_key),
                                             static_cast<std::uint64_t>(*token),
                                             b_.expiry_after(sent, lease), identity_);
    }
    spi::Busy busy;
    if (auto left = int_field(res.get(), 1)) busy.retry_after = std::chrono::milliseconds(std::max(1LL, *left));
    return busy;
  }

  std::chrono::milliseconds fallback_poll() const noexcept override {
    // Releases notify; a holder that dies is bounded by Busy::retry_after (its TTL). A
    // writer with a registered intent renews it well within writer_intent.
    if (intent_) return writer_intent / 3;
    return b_.listener().healthy() ? std::chrono::milliseconds(5000) : std::chrono::milliseconds(100);
  }

 private:
  LeaseBackend& b_;
  const spi::AttemptRequest& r_;
  const std::string identity_;
  std::uint64_t listen_id_ = 0;
  bool intent_ = false;   // this writer registered its intent to wait
  bool granted_ = false;
};

}  // namespace

LeaseHeldLock::LeaseHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
                             Clock::time_point server_expiry, std::string identity)
    : HeldLock(std::move(name), mode, std::move(owner_key), token, server_expiry),
      identity_(std::move(identity)) {}

LeaseBackend::LeaseBackend(PgOptions options)
    : options_(std::move(options)), sql_(options_.schema, options_.table) {
  caps_.reentrant = true;
  caps_.read_write = true;
  caps_.fair = false;
  caps_.fencing = true;
  caps_.push_wakeup = true;
  caps_.liveness = Liveness::lease;
  caps_.max_name_bytes = 1024;
  caps_.default_lease = options_.lease;
  caps_.lost_signal_bound = options_.lease;
  caps_.crash_release_bound = options_.lease;
  auto conn = PgConn::open(options_, options_.application_name);
  if (options_.create_tables) {
    try {
      conn->exec_simple(sql_.create_table, "creating the lease table",
                        Clock::now() + options_.command_timeout);
    } catch (const Error& e) {
      if (e.message().find("already exists") == std::string::npos &&
          e.message().find("duplicate key") == std::string::npos) {
        throw;
      }
    }
  }
  open_ = 1;
  idle_.push_back(std::move(conn));
  listener_ = std::make_unique<Listener>(options_, sql_.channel);
}

LeaseBackend::~LeaseBackend() = default;

Clock::time_point LeaseBackend::expiry_after(Clock::time_point sent, std::chrono::milliseconds lease) const noexcept {
  return sent + lease - lease / 100 - std::chrono::milliseconds(2);  // Redlock's drift allowance
}

std::unique_ptr<PgConn> LeaseBackend::take() {
  std::unique_lock lock(mu_);
  const auto deadline = Clock::now() + options_.command_timeout;
  while (idle_.empty() && open_ >= options_.pool) {
    if (freed_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() && open_ >= options_.pool) {
      throw Error(ErrorCode::unavailable, options_.where + ": all " + std::to_string(options_.pool) +
                                              " connections (pool=) are busy");
    }
  }
  if (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    return c;
  }
  ++open_;
  lock.unlock();
  try {
    return PgConn::open(options_, options_.application_name);
  } catch (...) {
    std::lock_guard again(mu_);
    --open_;
    freed_.notify_one();
    throw;
  }
}

void LeaseBackend::drop_idle() {
  std::lock_guard lock(mu_);
  open_ -= idle_.size();
  idle_.clear();
}

void LeaseBackend::give(std::unique_ptr<PgConn> conn) {
  std::lock_guard lock(mu_);
  if (conn && conn->ok() && !conn->in_flight()) {
    idle_.push_back(std::move(conn));
  } else {
    --open_;
  }
  freed_.notify_one();
}

ResultPtr LeaseBackend::run(const std::string& sql, const std::vector<std::string>& params,
                            std::string_view doing, Clock::time_point* sent) {
  for (int tries = 0;; ++tries) {
    auto conn = take();
    try {
      const auto start = Clock::now();
      if (sent) *sent = start;
      conn->send_params(sql, params, doing, start + options_.command_timeout);
      ResultPtr r = conn->wait_result(start + options_.command_timeout, doing);
      if (PQresultStatus(r.get()) != PGRES_TUPLES_OK && PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
        Error e = translate_error(options_.where, doing, conn->raw(), r.get());
        // The server ended this pooled connection while it sat idle (a restart, an admin):
        // its FATAL is the answer. Drop it and retry once on a fresh one.
        const bool ended = !conn->ok() || sqlstate_of(r.get()).starts_with("57P");
        if (ended) {
          conn.reset();
          drop_idle();  // they were opened before the same restart, most likely
        }
        give(std::move(conn));
        if (ended && tries == 0) continue;
        throw e;
      }
      give(std::move(conn));
      return r;
    } catch (const Error& e) {
      const bool broken = conn && !conn->ok();
      if (broken) drop_idle();
      if (conn) give(std::move(conn));
      // A pooled connection the server had closed: one retry on a fresh one (every
      // statement here is safe to repeat: conditional on the server clock and the owner).
      if (broken && tries == 0) continue;
      throw;
    }
  }
}

std::unique_ptr<spi::Acquisition> LeaseBackend::begin_acquire(const spi::AttemptRequest& request,
                                                              std::function<void()> wake) {
  return std::make_unique<LeaseAcquisition>(*this, request, std::move(wake));
}

bool LeaseBackend::release(spi::HeldLock& lock) {
  auto& hold = static_cast<LeaseHeldLock&>(lock);
  // A hold the core gave up (its lease about to run out unrenewed, or found gone) is left to
  // expire on the server: freeing it now would grant it to another before the lease the
  // holder was given has run out.
  if (lock.lost()) return false;
  const bool shared = lock.mode() == LockMode::shared;
  ResultPtr r = run(shared ? sql_.release_s : sql_.release_x,
                    {bytea_param(hold.identity()),
                     shared ? to_hex(lock.owner_key()) : bytea_param(lock.owner_key()), sql_.channel},
                    "release");
  return int_field(r.get(), 0).value_or(0) > 0;
}

void LeaseBackend::extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                               std::span<spi::RenewStatus> out) noexcept {
  constexpr std::size_t batch = 100;
  for (std::size_t begin = 0; begin < locks.size(); begin += batch) {
    const std::size_t end = std::min(locks.size(), begin + batch);
    std::string sql;
    for (std::size_t i = begin; i < end; ++i) {
      const auto& hold = static_cast<const LeaseHeldLock&>(*locks[i]);
      const auto name = to_hex(hold.identity());
      const auto owner = to_hex(hold.owner_key());
      const auto on_server = server_lease(lease);
      sql += (hold.mode() == LockMode::shared ? sql_.renew_s(name, owner, on_server) : sql_.renew_x(name, owner, on_server)) + ";";
    }
    std::unique_ptr<PgConn> conn;
    try {
      conn = take();
      const auto sent = Clock::now();
      conn->send_simple(sql, "renew", sent + options_.command_timeout);
      auto results = conn->wait_results(sent + options_.command_timeout, "renew");
      give(std::move(conn));
      if (results.size() != end - begin) throw Error(ErrorCode::internal, "renew: wrong result count");
      for (std::size_t i = begin; i < end; ++i) {
        const PGresult* r = results[i - begin].get();
        if (PQresultStatus(r) != PGRES_COMMAND_OK) throw Error(ErrorCode::unavailable, "renew failed");
        if (std::string_view(PQcmdTuples(const_cast<PGresult*>(r))) == "1") {
          locks[i]->set_server_expiry(expiry_after(sent, lease));
          out[i] = spi::RenewStatus::renewed;
        } else {
          out[i] = spi::RenewStatus::not_held;
        }
      }
    } catch (...) {
      if (conn) give(std::move(conn));
      for (std::size_t i = begin; i < end; ++i) out[i] = spi::RenewStatus::failed;
    }
  }
}

}  // namespace dlock::postgres
