#include "redis_backend.h"

#include <algorithm>
#include <charconv>
#include <random>

#include "acquisition.h"
#include "keys.h"
#include "permissions.h"

namespace dlock::redis {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t kRenewChunk = 100;  // locks per extend script call

std::string random_id() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   static_cast<std::uint64_t>(Clock::now().time_since_epoch().count())};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t v = rng();
    for (int i = 0; i < 16; ++i, v >>= 4) id[half * 16 + i] = kHex[v & 0xF];
  }
  return id;
}

std::string ms_text(milliseconds d) { return std::to_string(d.count()); }

// The client's estimate of when a lease taken at `sent` ends on the server: earlier by the
// Redlock allowance for clock drift (1% + 2 ms), so the holder is told before anyone else
// can be granted the lock even if the two clocks run slightly apart.
Clock::time_point lease_end(Clock::time_point sent, milliseconds lease) {
  return sent + lease - lease / 100 - milliseconds(2);
}

}  // namespace

// Runs `op` on a pooled connection; if the server closed or reset the connection (not an
// error reply, not a timeout), runs it once more on a newly opened one (the other idle
// connections are dropped: a server that closed one closed them all). A server that did not
// answer in time is not asked again at once: the retry would wait a second command timeout
// for a server that is not answering. Every script is safe to repeat: acquire recognises its
// own grant, release answers from its latch, renewal and abandon are idempotent.
template <class Op>
auto RedisBackend::with_retry(Op&& op) {
  for (int attempt = 0;; ++attempt) {
    auto conn = attempt == 0 ? pool_.take() : pool_.take_fresh();
    try {
      return op(*conn);
    } catch (const Error&) {
      if (attempt >= 1 || !conn->broken() || conn->timed_out()) throw;
    }
  }
}

RedisHeldLock::RedisHeldLock(std::string name, LockMode mode, std::string owner_key,
                             std::uint64_t token, Clock::time_point server_expiry)
    : HeldLock(std::move(name), mode, std::move(owner_key), token, server_expiry),
      release_id_(random_id()) {}

void RedisHeldLock::note_unanswered_renewal(milliseconds lease) noexcept {
  std::int64_t seen = unanswered_renewal_ms_.load();
  while (seen < lease.count() &&
         !unanswered_renewal_ms_.compare_exchange_weak(seen, lease.count())) {
  }
}

RedisBackend::RedisBackend(RedisOptions options) : options_(std::move(options)), pool_(options_) {
  caps_.reentrant = true;
  caps_.read_write = true;
  caps_.fair = true;
  caps_.fencing = true;
  caps_.push_wakeup = true;
  caps_.liveness = Liveness::lease;
  caps_.max_name_bytes = 1024;
  caps_.default_lease = options_.lease;
  caps_.lost_signal_bound = options_.lease;
  caps_.crash_release_bound = options_.lease;

  marker_ = dataset_marker(options_.prefix);
  grace_text_ = ms_text(options_.restart_grace.value_or(options_.lease));

  auto first = Connection::open(options_);
  scripts_ = std::make_unique<Scripts>(*first);
  check_permissions(*first, *scripts_, options_);
  // A user denied CLIENT REPLY waits with a plain first attempt (one reply more per wait).
  const std::string_view reply_on[] = {"CLIENT", "REPLY", "ON"};
  Reply on = first->command(reply_on);
  client_reply_allowed_ = on->type == REDIS_REPLY_STATUS;
  pool_.add(std::move(first));
}

RedisBackend::~RedisBackend() {
  {
    std::lock_guard lock(undo_mu_);
    stopping_ = true;
  }
  undo_cv_.notify_all();
  if (undo_thread_.joinable()) undo_thread_.join();
}

std::unique_ptr<Connection> RedisBackend::wait_connection() {
  {
    std::lock_guard lock(wait_mu_);
    while (!idle_waits_.empty()) {
      auto c = std::move(idle_waits_.back());
      idle_waits_.pop_back();
      // As the pool does: one that rested a while is checked for a close by the server.
      const bool rested = Clock::now() - c->idle_since > std::chrono::milliseconds(200);
      if (!c->broken() && !(rested && c->stale())) return c;
    }
  }
  return Connection::open(options_);
}

void RedisBackend::keep_wait_connection(std::unique_ptr<Connection> c) noexcept {
  constexpr std::size_t kMaxIdle = 8;
  std::lock_guard lock(wait_mu_);
  if (idle_waits_.size() >= kMaxIdle) return;
  c->idle_since = Clock::now();
  try {
    idle_waits_.push_back(std::move(c));
  } catch (const std::bad_alloc&) {
    // Not kept: the next wait opens a connection.
  }
}

std::unique_ptr<spi::Acquisition> RedisBackend::begin_acquire(const spi::AttemptRequest& req,
                                                              std::function<void()> wake) {
  return std::make_unique<RedisAcquisition>(*this, req, std::move(wake));
}

std::shared_ptr<spi::HeldLock> RedisBackend::make_held(const spi::AttemptRequest& req,
                                                       std::uint64_t token,
                                                       Clock::time_point sent) const {
  return std::make_shared<RedisHeldLock>(std::string(req.name), req.mode, std::string(req.owner_key),
                                         token, lease_end(sent, req.lease));
}

long long RedisBackend::run_acquire(const spi::AttemptRequest& req, bool may_hold,
                                    Clock::time_point& sent, bool& lost) {
  const std::string hold = lock_key(options_.prefix, req.name);
  const std::string lease = ms_text(req.lease);
  const std::string heartbeat = ms_text(options_.fair_heartbeat);
  const std::string_view keys[] = {hold, marker_};
  // The script looks for this owner's hold only where it can exist: a registered waiter may
  // have been handed the lock; a retry may follow a grant whose reply was lost.
  std::string_view args[] = {req.owner_key, req.mode == LockMode::shared ? "s" : "x", lease,
                             req.waiter_id, req.will_wait ? "1" : "0", heartbeat,
                             may_hold ? "1" : "0", grace_text_, ""};
  sent = Clock::now();
  int tries = 0;
  return with_retry([&](Connection& conn) -> long long {
    if (tries++ > 0) args[6] = "1";
    args[8] = conn.run_id;  // of the server this connection reached
    sent = Clock::now();  // the lease is counted from before the request left
    Reply r;
    try {
      r = scripts_->run(conn, Script::acquire, keys, args);
    } catch (const Error&) {
      // The request may have left: the server may run it now, or when it answers again.
      if (conn.broken()) lost = true;
      throw;
    }
    if (r->type != REDIS_REPLY_INTEGER) conn.fail("acquire script", r.get());
    return r->integer;
  });
}

void RedisBackend::append_silent_acquire(Connection& c, const spi::AttemptRequest& req,
                                         const LockKeys& k) const {
  const std::string lease = ms_text(req.lease);
  const std::string heartbeat = ms_text(options_.fair_heartbeat);
  const std::string_view keys[] = {k.hold, marker_};
  const std::string_view args[] = {req.owner_key, req.mode == LockMode::shared ? "s" : "x", lease,
                                   req.waiter_id, "1", heartbeat, "0", grace_text_, c.run_id, "1"};
  const std::string_view skip[] = {"CLIENT", "REPLY", "SKIP"};
  c.append(skip);
  scripts_->append(c, Script::acquire, keys, args);
}

bool RedisBackend::queues_at_once(std::string_view name) {
  if (!client_reply_allowed_) return false;
  std::lock_guard lock(wait_mu_);
  return busy_names_.count(std::string(name)) > 0;
}

void RedisBackend::note_busy(std::string_view name) {
  constexpr std::size_t kMaxNames = 4096;  // then forgotten all at once: a cache, not a record
  std::lock_guard lock(wait_mu_);
  try {
    if (busy_names_.size() >= kMaxNames) busy_names_.clear();
    busy_names_.emplace(name);
  } catch (const std::bad_alloc&) {
    // Not noted: the next wait on this name starts with a plain attempt.
  }
}

void RedisBackend::abandon(const spi::AttemptRequest& req, bool lost,
                           bool silent_pending) noexcept {
  // A request whose reply was lost may still wait in the server (stalled: DEBUG SLEEP, a slow
  // script of another client, a VM pause) and run when it answers again, after an abandon
  // sent now on another connection. The clean-up thread orders them (clean_up_loop).
  if (lost) return hand_over(req, silent_pending);
  try {
    with_retry([&](Connection& conn) {
      return run_abandon(conn, req.name, req.waiter_id, req.owner_key, req.mode, req.lease,
                         silent_pending);
    });
  } catch (const Error& e) {
    // The server did not answer (or closed twice): the clean-up thread tries again. Other
    // refusals are left to the heartbeat deadline (the entry) and the lease (a stray grant).
    if (e.code() == ErrorCode::unavailable) hand_over(req, silent_pending);
  } catch (...) {
  }
}

void RedisBackend::hand_over(const spi::AttemptRequest& req, bool silent_pending) noexcept {
  try {
    const auto now = Clock::now();
    queue_undo(Undo{std::string(req.name), std::string(req.owner_key), std::string(req.waiter_id),
                    {}, req.mode, req.lease, silent_pending, now, now + req.lease});
  } catch (...) {
    // No memory: the lease ends a stray grant, the heartbeat a queue entry.
  }
}

void RedisBackend::hand_over_release(const RedisHeldLock& held) noexcept {
  try {
    const auto now = Clock::now();
    const milliseconds lease = held.unanswered_renewal();
    queue_undo(Undo{held.name(), held.owner_key(), {}, held.release_id(), held.mode(), lease,
                    false, now, now + lease});
  } catch (...) {
    // No memory: the lease a late renewal set ends the hold.
  }
}

void RedisBackend::queue_undo(Undo u) noexcept {
  try {
    std::lock_guard lock(undo_mu_);
    if (stopping_) return;
    undos_.push_back(std::move(u));
    if (!undo_thread_.joinable()) undo_thread_ = std::thread([this] { clean_up_loop(); });
  } catch (...) {
    // No memory or no thread: the lease ends a stray grant, the heartbeat a queue entry.
    return;
  }
  undo_cv_.notify_one();
}

// Why a PING first: the server runs the requests of one event-loop pass before it writes their
// replies, and it reads every connection that had data when the pass began. A lost request
// left before its timeout was noticed, so before this PING: it is run in the pass that
// answers the PING or in an earlier one, never later (unless the network itself held it back,
// which a loopback or LAN does not for seconds). The abandon, sent only once the PING's reply
// is here, is run in a later pass: after the lost request, whatever it did.
void RedisBackend::barrier_abandon(const Undo& u) {
  auto conn = pool_.take();
  const std::string_view ping[] = {"PING"};
  Reply p = conn->command(ping);
  if (p->type == REDIS_REPLY_ERROR) conn->fail("ping", p.get());
  Reply r = u.release_id.empty() ? run_abandon(*conn, u.name, u.waiter_id, u.owner_key, u.mode,
                                               u.lease, u.silent_pending)
                                 : run_release(*conn, u.name, u.owner_key, u.release_id);
  if (r->type != REDIS_REPLY_INTEGER) conn->fail("clean-up script", r.get());
}

Reply RedisBackend::run_abandon(Connection& conn, std::string_view name, std::string_view waiter_id,
                                std::string_view owner_key, LockMode mode, milliseconds lease,
                                bool silent_pending) {
  const std::string hold = lock_key(options_.prefix, name);
  const std::string lease_text = ms_text(lease);
  const std::string heartbeat = ms_text(options_.fair_heartbeat);
  const std::string mark_ttl = silent_pending ? latch_ttl() : "0";
  const std::string_view keys[] = {hold, marker_};
  const std::string_view args[] = {waiter_id,  owner_key,  mode == LockMode::shared ? "s" : "x",
                                   lease_text, heartbeat,  grace_text_,
                                   conn.run_id, mark_ttl};
  return scripts_->run(conn, Script::abandon, keys, args);
}

std::string RedisBackend::latch_ttl() const {
  return ms_text(std::max(milliseconds(10000), options_.command_timeout * 4));
}

// Runs each handed-over abandon until it gets through. It gives up one lease after it was
// handed over, or after the server last timed out (a server that did not answer may still
// run the lost request when it does; one that closed or refused the connection dropped it
// with the connection): a grant made then has expired by itself.
void RedisBackend::clean_up_loop() noexcept {
  constexpr milliseconds kFirstRetry{50}, kMaxRetry{1000};
  std::unique_lock lock(undo_mu_);
  while (!stopping_) {
    if (undos_.empty()) {
      undo_cv_.wait(lock);
      continue;
    }
    auto next = std::min_element(undos_.begin(), undos_.end(),
                                 [](const Undo& a, const Undo& b) { return a.next_try < b.next_try; });
    if (next->next_try > Clock::now()) {
      undo_cv_.wait_until(lock, next->next_try);
      continue;
    }
    Undo u = std::move(*next);
    undos_.erase(next);
    lock.unlock();
    bool done = false;
    bool no_answer = false;
    try {
      barrier_abandon(u);
      done = true;
    } catch (const Error& e) {
      // (errors.cpp words every timeout so: a reply, a send, a connect.)
      no_answer = e.code() == ErrorCode::unavailable &&
                  e.message().find("timed out") != std::string::npos;
    } catch (...) {
    }
    lock.lock();
    if (done) continue;
    const auto now = Clock::now();
    if (no_answer) u.give_up = std::max(u.give_up, now + u.lease);
    if (now >= u.give_up) continue;
    u.backoff = std::clamp(u.backoff * 2, kFirstRetry, kMaxRetry);
    u.next_try = now + u.backoff;
    try {
      undos_.push_back(std::move(u));
    } catch (...) {
    }
  }
}

bool RedisBackend::release(spi::HeldLock& lock) {
  auto& held = static_cast<RedisHeldLock&>(lock);
  // Past our (early, see lease_end) estimate of its end, the hold is not ours to count on,
  // and freeing it now would hand the lock on before the lease the server promised ran out:
  // let the server expire it. Unless a renewal of it was never answered: a server that
  // stalled may run it between our estimate and its own end, and renew for a full lease a
  // hold nobody holds any more. Released after that renewal (by the clean-up thread, behind
  // a PING: see barrier_abandon), owner-checked: the owner key is this acquisition's alone.
  if (held.server_expiry() <= Clock::now()) {
    if (held.unanswered_renewal() > milliseconds(0)) hand_over_release(held);
    return false;
  }
  // A retry after a lost reply asks again with the same latch, which answers for the first
  // request instead of releasing twice.
  return with_retry([&](Connection& conn) {
    Reply r = run_release(conn, held.name(), held.owner_key(), held.release_id());
    if (r->type != REDIS_REPLY_INTEGER) conn.fail("release script", r.get());
    return r->integer == 1;
  });
}

Reply RedisBackend::run_release(Connection& conn, std::string_view name, std::string_view owner_key,
                                std::string_view release_id) {
  const std::string hold = lock_key(options_.prefix, name);
  const std::string latch = latch_ttl();
  const std::string heartbeat = ms_text(options_.fair_heartbeat);
  const std::string_view keys[] = {hold, marker_};
  // The script names this request's latch after the hold (LockKeys::latch). run_id: of the
  // server this connection reached (a hand-over's data-loss guard).
  const std::string_view args[] = {owner_key,   release_id, latch,
                                   heartbeat, grace_text_, conn.run_id};
  return scripts_->run(conn, Script::release, keys, args);
}

void RedisBackend::extend_many(std::span<spi::HeldLock* const> locks, milliseconds lease,
                               std::span<spi::RenewStatus> out) noexcept {
  std::fill(out.begin(), out.end(), spi::RenewStatus::failed);
  if (locks.empty()) return;
  try {
    const std::string lease_text = ms_text(lease);
    // Keys and arguments of every chunk, kept alive until the replies are read.
    std::vector<std::string> key_store;
    key_store.reserve(locks.size());
    for (auto* l : locks) key_store.push_back(lock_key(options_.prefix, l->name()));
    struct Chunk {
      std::size_t first, count;
      std::vector<std::string_view> keys, args;
    };
    std::vector<Chunk> chunks;
    for (std::size_t first = 0; first < locks.size(); first += kRenewChunk) {
      Chunk c{first, std::min(kRenewChunk, locks.size() - first), {}, {}};
      c.args.push_back(lease_text);
      for (std::size_t i = first; i < first + c.count; ++i) {
        c.keys.push_back(key_store[i]);
        c.args.push_back(locks[i]->owner_key());
      }
      chunks.push_back(std::move(c));
    }

    // A renewal that cannot finish before a lease runs out is worthless, and blocking past
    // it would keep the core from telling that holder it lost the lock: every wait below is
    // bounded by the earliest expiry.
    // (A lease already past its expiry, only seen by an explicit extend(), gets the usual
    // timeouts: its answer is not racing anything.)
    Clock::time_point earliest = Clock::time_point::max();
    for (auto* l : locks) earliest = std::min(earliest, l->server_expiry());
    if (earliest <= Clock::now()) earliest = Clock::time_point::max();
    Clock::time_point sent;
    std::vector<Reply> replies;
    for (int attempt = 0;; ++attempt) {
      const auto left = earliest == Clock::time_point::max()
                            ? options_.command_timeout
                            : std::chrono::floor<milliseconds>(earliest - Clock::now());
      if (left <= milliseconds(0)) return;  // all stay `failed`
      auto conn = attempt == 0 ? pool_.take(earliest) : pool_.take_fresh(earliest);
      bool sending = false;
      try {
        if (left < options_.command_timeout && !conn->set_timeout(left)) continue;
        sent = Clock::now();
        replies.clear();
        sending = true;
        for (auto& c : chunks) scripts_->append(*conn, Script::extend, c.keys, c.args);
        for (std::size_t i = 0; i < chunks.size(); ++i) replies.push_back(conn->read_reply());
        for (std::size_t i = 0; i < chunks.size(); ++i) {
          if (Scripts::is_noscript(replies[i].get())) {
            // The server lost its scripts (SCRIPT FLUSH, restart): load, renew this chunk again.
            scripts_->load(*conn, Script::extend);
            replies[i] = scripts_->run(*conn, Script::extend, chunks[i].keys, chunks[i].args);
          }
        }
        if (left < options_.command_timeout) conn->set_timeout(options_.command_timeout);
        break;
      } catch (const Error&) {
        // Requests may have left without their replies being read (a stalled server): the
        // server may run them late, even after the core gave a hold up (see release()).
        if (sending && conn->broken()) {
          for (auto* l : locks) static_cast<RedisHeldLock*>(l)->note_unanswered_renewal(lease);
        }
        // Once more on a fresh connection, if there is time for a connect and a reply.
        if (attempt >= 1 || !conn->broken()) throw;
      }
    }
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const redisReply* r = replies[i].get();
      if (r->type != REDIS_REPLY_ARRAY || r->elements != chunks[i].count) continue;  // stays failed
      for (std::size_t j = 0; j < chunks[i].count; ++j) {
        const redisReply* e = r->element[j];
        if (e->type != REDIS_REPLY_INTEGER) continue;
        const std::size_t idx = chunks[i].first + j;
        if (e->integer == 1) {
          locks[idx]->set_server_expiry(lease_end(sent, lease));
          out[idx] = spi::RenewStatus::renewed;
        } else {
          out[idx] = spi::RenewStatus::not_held;
        }
      }
    }
  } catch (...) {
    // Transport failure or refusal: what was not answered stays `failed`; the core retries.
  }
}

}  // namespace dlock::redis
