#include "acquisition.h"

#include <poll.h>

#include <algorithm>
#include <ctime>

#include "errors.h"
#include "keys.h"

namespace dlock::postgres {
namespace {

using std::chrono::milliseconds;

bool is_error(const PGresult* r) { return PQresultStatus(r) != PGRES_TUPLES_OK; }

// A wait that the server ends by itself within this is given up by reading its answer, not
// by a cancel: a cancel costs at least a round trip on another session (a new connection,
// which the postmaster forks a process for, when none is free: 15–20 ms on an idle
// loopback, hundreds under load), and while it is on its way the FIFO queue may grant the
// lock to the leaving waiter. Covers lock_timeout's rounding up
// to whole milliseconds and a core that wakes a little before the server's timer fires.
constexpr auto kOutwait = milliseconds(5);
// A taken cancel request ends a wait within a round trip (the server signals the waiter
// before it closes the request's connection): silence for longer means it arrived before
// the wait started and was dropped. Each resend costs a connection (a fork on the server),
// so a waiter slow to be scheduled on a loaded host should not cause one.
constexpr auto kResendCancelAfter = milliseconds(50);
// lock_timeout is an int of milliseconds.
constexpr auto kMaxLockTimeout = milliseconds(0x7fffffff);

// What a pg_cancel_backend sent on another session did.
enum class Cancelled {
  yes,          // the server signalled the waiter's process while it waited for a lock
  not_waiting,  // it was not waiting for a lock (yet, or any more): nothing was signalled
  failed,       // no answer by the deadline, an error, or not a backend of this user
};

// Asks the server, on `h` (another session of the pool, locked by the caller), to cancel
// the statement of server process `pid` if it is waiting for a lock: one round trip on a
// backend that exists, no connection for the postmaster to fork, and the server signals
// the process directly. Only a lock wait is signalled: PostgreSQL drops a cancel that
// reaches a backend between statements, so one sent before the wait statement has started
// would be lost, and the wait would then run on. A statement unanswered at the deadline
// stays in flight (it changes no lock: the next user of the session drains it, or the
// monitor reads it).
Cancelled cancel_if_waiting(PgConn& h, int pid, PgConn::Clock::time_point deadline) noexcept {
  try {
    h.send_prepared(stmt::cancel, pid, nullptr, "cancel a wait", deadline);
    ResultPtr r = h.wait_result(deadline, "cancel a wait");
    if (is_error(r.get())) return Cancelled::failed;
    if (PQntuples(r.get()) == 0) return Cancelled::not_waiting;
    // f: not, or no longer, a backend of this user.
    return parse_unlock_row(r.get()) ? Cancelled::yes : Cancelled::failed;
  } catch (const Error&) {
    return Cancelled::failed;
  }
}

}  // namespace

PgAcquisition::PgAcquisition(PgBackend& backend, const spi::AttemptRequest& request,
                             std::function<void()> wake)
    : backend_(backend),
      pool_(backend.pool()),
      request_(request),
      wake_(std::move(wake)),
      identity_(key_identity(backend.options().prefix, request.name)) {}

PgAcquisition::~PgAcquisition() { abandon(); }

std::int64_t PgAcquisition::key() const {
  if (index_ >= max_key_candidates) {
    throw Error(ErrorCode::internal, backend_.options().where + ": " +
                                         std::to_string(max_key_candidates) +
                                         " advisory keys of one name all belong to other names");
  }
  if (key_index_ != index_) {
    key_ = advisory_key(identity_, index_);
    key_index_ = index_;
  }
  return key_;
}

std::shared_ptr<PgHeldLock> PgAcquisition::make_hold(std::shared_ptr<Session> s, std::int64_t key,
                                                     std::int64_t token, Clock::time_point sent) {
  auto hold = std::make_shared<PgHeldLock>(std::string(request_.name), request_.mode,
                                           std::string(request_.owner_key),
                                           static_cast<std::uint64_t>(token),
                                           backend_.expiry_after(sent), s, key, pool_);
  s->holds.add(hold);  // marked lost at once if the session already ended
  return hold;
}

bool PgAcquisition::unlock_locked(Session& s, std::int64_t key) noexcept {
  PgConn* c = s.conn();
  if (c == nullptr) return false;
  for (int tries = 0; tries < 2; ++tries) {
    try {
      const auto deadline = Clock::now() + backend_.options().command_timeout;
      c->send_prepared(shared() ? stmt::unlock_s : stmt::unlock_x, key, nullptr, "unlock", deadline);
      ResultPtr r = c->wait_result(deadline, "unlock");
      // A cancel meant for the wait can land on this statement instead: run it again.
      if (is_error(r.get()) && sqlstate_of(r.get()) == sqlstate::query_canceled) continue;
      if (is_error(r.get())) break;
      return parse_unlock_row(r.get());
    } catch (const Error&) {
      break;
    }
  }
  s.close_locked();  // doubt: the server frees whatever the session held
  return false;
}

bool PgAcquisition::adopt_known_key() {
  auto known = pool_->owners.find(identity_);
  if (!known) return false;
  index_ = known->index;
  key_index_ = known->index;
  key_ = known->key;
  resolved_ = true;
  return true;
}

void PgAcquisition::resolve_key_locked(Session& s) {
  if (resolved_ || adopt_known_key()) return;
  auto& owners = pool_->owners;
  const auto& o = backend_.options();
  PgConn* c = s.conn();
  // A NULL answer means a concurrent claim committed after the statement's snapshot: the
  // next statement sees it. Three in a row would take three racing claims of one key.
  for (int round = 0; round < 3; ++round) {
    const auto deadline = Clock::now() + o.command_timeout;
    const std::int64_t k = key();
    c->send_prepared(stmt::claim, k, &identity_, "claim a key", deadline);
    ResultPtr r = c->wait_result(deadline, "claim a key");
    if (is_error(r.get())) throw translate_error(o.where, "claim a key", c->raw(), r.get());
    const std::optional<bool> mine = parse_claim_row(r.get());
    if (!mine) continue;
    if (*mine) {
      owners.confirm(identity_, {index_, k});
      resolved_ = true;
      return;
    }
    return;  // another name's key: the caller moves to the next candidate
  }
  throw Error(ErrorCode::unavailable, o.where + ": claim a key: the owner row stayed invisible");
}

spi::Attempt PgAcquisition::try_once() {
  const auto& o = backend_.options();
  bool retried = false;
  while (true) {
    if (!resolved_) adopt_known_key();
    const std::int64_t k = key();
    auto s = pool_->for_try(k);
    if (!s) {
      // Every session holds this key (more of the provider's readers than `pool`) or waits:
      // a caller who will wait polls (attempt() finds no waiter session either) until one
      // of them releases; a try-once cannot tell busy from full, and says so.
      if (request_.will_wait) return spi::Busy{};
      throw Error(ErrorCode::unavailable, o.where + ": all " + std::to_string(o.pool) +
                                              " connections (pool=) are in use or hold this name already");
    }
    enum { busy, granted, collision, failed } outcome = failed;
    std::optional<Error> error;
    bool broken = false;
    std::int64_t token = 0;
    Clock::time_point sent;
    {
      SessionUse use(*s);
      if (PgConn* c = s->conn()) {
        try {
          resolve_key_locked(*s);
          if (!resolved_) {
            outcome = collision;
          } else {
            sent = Clock::now();
            const auto deadline = sent + o.command_timeout;
            c->send_prepared(shared() ? stmt::try_s : stmt::try_x, k, nullptr, "acquire", deadline);
            ResultPtr r = c->wait_result(deadline, "acquire");
            if (is_error(r.get())) {
              error = translate_error(o.where, "acquire", c->raw(), r.get());
              if (c->ok() && !sqlstate_of(r.get()).starts_with("57P")) {
                unlock_locked(*s, k);  // the lock may have been taken before the statement failed
              } else {  // the server had ended the session (its FATAL arrived as the answer)
                broken = true;
                s->close_locked();
              }
            } else {
              const AcquireRow row = parse_acquire_row(r.get());
              if (row.got) {
                outcome = granted;
                token = *row.token;
              } else {
                outcome = busy;
              }
            }
          }
        } catch (const Error& e) {
          error = e;
          broken = !c->ok();
          s->close_locked();  // doubt: the try may have been granted
        }
      } else {
        error = Error(ErrorCode::unavailable, o.where + ": acquire: the connection was closed");
        broken = true;
      }
    }
    pool_->done_using(*s);
    if (outcome != granted) pool_->unreserve(*s, k);
    if (s->dead.load()) pool_->forget(s);
    switch (outcome) {
      case granted:
        return make_hold(std::move(s), k, token, sent);
      case busy:
        return spi::Busy{};
      case collision:
        ++index_;
        continue;
      case failed:
        // A connection the server had closed (idle_session_timeout, a restart) costs one retry
        // on a fresh one; a timeout does not (the server is slow: do not double the wait).
        if (broken && !retried) {
          retried = true;
          continue;
        }
        throw *error;
    }
  }
}

void PgAcquisition::send_wait() {
  const auto now = Clock::now();
  const auto& o = backend_.options();
  milliseconds timeout = o.wait_chunk;  // 0: none
  if (request_.deadline != Clock::time_point::max()) {
    // Rounded up: the server never ends the wait before the caller's deadline.
    const auto left = std::max(std::chrono::ceil<milliseconds>(request_.deadline - now), milliseconds(1));
    if (left <= kMaxLockTimeout && (timeout.count() == 0 || left < timeout)) timeout = left;
  }
  const std::string lock_timeout = std::to_string(timeout.count());
  waiter_->wake = wake_;
  waiter_->conn()->send_prepared(shared() ? stmt::wait_s : stmt::wait_x, key(), &lock_timeout, "wait",
                                 now + o.command_timeout);
  waiter_->wait_state = WaitState::in_flight;
  wait_ends_ = timeout.count() == 0 ? Clock::time_point::max() : now + timeout;
}

spi::Attempt PgAcquisition::attempt() {
  if (waiter_) return from_waiter();
  const bool first = !attempted_;
  attempted_ = true;
  if (first && request_.will_wait && (resolved_ || adopt_known_key())) {
    if (auto a = queue_at_once()) return std::move(*a);
  }
  spi::Attempt a = try_once();
  if (std::holds_alternative<std::shared_ptr<spi::HeldLock>>(a) || !request_.will_wait) return a;
  // The lock is busy, so the caller will wait anyway: a new connection for the wait (if the
  // pool had one idle session only) costs no grant, and keeps that session for a cancel.
  waiter_ = pool_->for_wait(/*keep_spare=*/true);
  pool_full_ = waiter_ == nullptr;
  if (pool_full_) return a;  // no session to wait on: the core polls (fallback_poll)
  start_wait(std::chrono::microseconds(0));
  pool_->poke();
  return a;
}

bool PgAcquisition::start_wait(std::chrono::microseconds window) {
  std::optional<Error> error;
  bool answered = false;
  {
    SessionUse use(*waiter_);
    PgConn* c = waiter_->conn();
    if (c == nullptr) {
      error = Error(ErrorCode::unavailable, backend_.options().where + ": wait: the connection was closed");
    } else {
      try {
        send_wait();
        if (window.count() > 0) {
          const auto until = Clock::now() + window;
          bool alive = c->poll_input();
          while (alive && !c->result_ready()) {
            const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now());
            if (left.count() <= 0) break;
            pollfd p{c->socket(), POLLIN, 0};
            const timespec ts{0, static_cast<long>(left.count())};
            if (::ppoll(&p, 1, &ts, nullptr) <= 0) break;
            alive = c->poll_input();
          }
          if (!alive || c->result_ready()) {
            waiter_->finish_wait_locked(alive);  // a lost connection: from_waiter() forgets it
            answered = true;
          }
        }
      } catch (const Error& e) {
        error = e;
        waiter_->close_locked();
      }
    }
  }
  if (error) {
    auto s = std::move(waiter_);
    pool_->wait_ended(s);
    pool_->forget(s);
    throw *error;
  }
  return answered;
}

std::optional<spi::Attempt> PgAcquisition::queue_at_once() {
  // Long enough for a round trip on a quiet LAN; short enough that holding the caller here
  // delays nothing it could do meanwhile (cancellation is checked between attempts).
  constexpr auto kAnswerWindow = std::chrono::microseconds(500);
  waiter_ = pool_->for_wait();
  if (!waiter_) return std::nullopt;
  if (start_wait(kAnswerWindow)) return from_waiter();  // reads the answer kept there
  pool_->poke();  // the monitor watches for the answer from here on
  return spi::Attempt{spi::Busy{}};
}

spi::Attempt PgAcquisition::from_waiter() {
  const auto& o = backend_.options();
  std::optional<Error> error;
  std::int64_t token = 0;
  Clock::time_point answered;
  {
    SessionUse use(*waiter_);
    PgConn* c = waiter_->conn();
    if (c == nullptr) {
      error = Error(ErrorCode::unavailable, o.where + ": wait: the connection was lost");
    } else if (waiter_->wait_state == WaitState::in_flight) {
      // A spurious wake-up. Should the wait's answer have arrived while we held the
      // session, the monitor stopped watching it: the poke makes it look again.
      pool_->poke();
      return spi::Busy{};
    } else if (waiter_->wait_state == WaitState::none) {
      if (past_deadline()) return spi::Busy{};  // the last chunk ended at the deadline: done
      try {
        send_wait();
      } catch (const Error& e) {
        error = e;
        waiter_->close_locked();
      }
    } else {
      ResultPtr r = std::move(waiter_->wait_result);
      waiter_->wait_state = WaitState::none;
      answered = waiter_->wait_answered_at;
      const std::int64_t k = key();
      try {
        if (!r) {
          error = Error(ErrorCode::unavailable, o.where + ": wait: the connection was lost");
        } else if (!is_error(r.get())) {
          const AcquireRow row = parse_acquire_row(r.get());
          if (row.got) {
            token = *row.token;
          } else {  // cannot happen (the wait answers only when granted): never keep it
            unlock_locked(*waiter_, k);
            error = Error(ErrorCode::internal, o.where + ": wait: answered without a grant");
          }
        } else {
          const std::string state = sqlstate_of(r.get());
          const bool chunk_end = state == sqlstate::lock_not_available || state == sqlstate::query_canceled;
          // Translated before the unlock, which closes (frees) the connection when it fails.
          if (!chunk_end) error = translate_error(o.where, "wait", c->raw(), r.get());
          unlock_locked(*waiter_, k);  // undoes a grant that raced with the chunk's end
          // Past the deadline the core gives up: nothing stays queued.
          if (chunk_end && waiter_->conn() && !past_deadline()) send_wait();
        }
      } catch (const Error& e) {
        error = e;
        waiter_->close_locked();
      }
      if (!error && !token && waiter_->conn() == nullptr) {
        error = Error(ErrorCode::unavailable, o.where + ": wait: the connection was lost");
      }
    }
  }
  if (token) {
    auto s = std::move(waiter_);
    const std::int64_t k = key();
    pool_->wait_granted(*s, k);
    return make_hold(std::move(s), k, token, answered);
  }
  if (error) {
    auto s = std::move(waiter_);
    pool_->wait_ended(s);
    if (s->dead.load()) pool_->forget(s);
    throw *error;
  }
  pool_->poke();
  return spi::Busy{};
}

std::chrono::milliseconds PgAcquisition::fallback_poll() const noexcept {
  using std::chrono::milliseconds;
  if (pool_full_) return milliseconds(25);  // no server-side wait: poll
  return milliseconds(1000);  // the monitor wakes us; a spurious attempt costs no round trip
}

void PgAcquisition::abandon() noexcept {
  if (!waiter_) return;
  const auto& o = backend_.options();
  // At the deadline (the usual give-up) the server ends the wait by itself: its last chunk's
  // lock_timeout runs out then, so reading the answer costs no cancel.
  const bool ends_by_itself = wait_ends_ != Clock::time_point::max() && wait_ends_ - Clock::now() <= kOutwait;
  // Earlier (a cancellation, an error) the wait is cancelled, on an idle session of the pool
  // if there is one, borrowed before the waiter's session is locked (the pool's mutex is
  // never taken under a session's).
  std::shared_ptr<Session> helper = ends_by_itself ? nullptr : pool_->for_cancel();
  {
    SessionUse use(*waiter_);
    PgConn* c = waiter_->conn();
    if (c != nullptr && waiter_->wait_state == WaitState::in_flight) {
      // One command_timeout (after the wait's own end) for the cancel and the answer
      // together. A server that takes neither by then loses the session: closing it frees on
      // the server whatever the wait may yet be granted, and no late cancel can hit a
      // statement of a reused one.
      const auto now = Clock::now();
      const auto deadline = (ends_by_itself ? std::max(now, wait_ends_) : now) + o.command_timeout;
      try {
        if (!ends_by_itself && !cancel_wait(*c, helper.get(), deadline)) {
          throw Error(ErrorCode::unavailable, "cancel a wait: not taken");
        }
        waiter_->wait_result = c->wait_result(deadline, "end a wait");
        waiter_->wait_state = WaitState::done;
      } catch (const Error&) {
        waiter_->close_locked();
      }
    }
    if (waiter_->conn() != nullptr && waiter_->wait_state == WaitState::done) {
      std::int64_t k = 0;
      try {
        k = key();
      } catch (const Error&) {
      }
      // Granted, granted in the cancel's race, or a collision's lock: unlock it either way.
      if (waiter_->wait_result) unlock_locked(*waiter_, k);
    }
    waiter_->wait_state = WaitState::none;
    waiter_->wait_result.reset();
    waiter_->wake = nullptr;
  }
  if (helper) {
    pool_->done_using(*helper);
    if (helper->dead.load()) pool_->forget(helper);
  }
  pool_->wait_ended(waiter_);
  if (waiter_->dead.load()) pool_->forget(waiter_);
  waiter_.reset();
}

bool PgAcquisition::cancel_wait(PgConn& c, Session* helper, Clock::time_point deadline) noexcept {
  // A wait that has ended (answered, or its connection lost) needs no cancel, and a lost
  // connection's server process id may no longer be the waiter's.
  auto ended = [&c] { return !c.poll_input() || c.result_ready(); };
  if (ended()) return c.ok();
  if (helper != nullptr) {
    SessionUse use(*helper, std::try_to_lock);  // never waits for a session in use
    PgConn* h = use.owns() ? helper->conn() : nullptr;
    // A statement left in flight there would have to be drained first: not this one.
    if (h != nullptr && !h->in_flight()) {
      // The wait statement was sent, but may not have reached its lock wait yet: ask again,
      // each time after the waiter's socket stayed silent for up to 1 ms, until it waits or
      // answers (a grant, or an error).
      while (true) {
        const Cancelled done = cancel_if_waiting(*h, c.backend_pid(), deadline);
        if (done == Cancelled::yes) return true;
        if (!h->ok()) {
          helper->close_locked();  // the caller forgets it
          break;
        }
        if (done == Cancelled::failed) break;
        if (Clock::now() >= deadline) return false;
        pollfd p{c.socket(), POLLIN, 0};
        const timespec ms{0, 1'000'000};
        (void)::ppoll(&p, 1, &ms, nullptr);
        if (ended()) return c.ok();
      }
    }
  }
  // No idle session, or it could not carry the cancel: libpq's cancel request (a new
  // connection), with whatever time is left. It cannot ask whether the waiter is in its
  // wait yet, and one that reaches the server process between statements is dropped: sent
  // again each time the wait stays silent for kResendCancelAfter after one was taken.
  while (Clock::now() < deadline && c.cancel(deadline)) {
    const auto left = std::min<Clock::duration>(kResendCancelAfter, deadline - Clock::now());
    if (left.count() > 0) {
      pollfd p{c.socket(), POLLIN, 0};
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      const timespec ts{static_cast<time_t>(ns / 1'000'000'000),
                        static_cast<long>(ns % 1'000'000'000)};
      (void)::ppoll(&p, 1, &ts, nullptr);
    }
    if (ended()) return c.ok();
  }
  return false;
}

}  // namespace dlock::postgres
