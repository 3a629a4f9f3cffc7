// Session: one lock connection and what lives on it — the holds multiplexed on it (never
// two of one key) or, while it is dedicated to one acquire, that acquire's blocking wait.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>

#include "connection.h"
#include "dlock/error.h"
#include "dlock/spi/session_holds.h"

namespace dlock::postgres {

enum class WaitState {
  none,       // no wait on this session
  in_flight,  // a blocking acquire statement was sent; the monitor watches for its result
  done,       // its result (or the connection's end) arrived; the acquire has not read it
};

class Session {
 public:
  explicit Session(std::unique_ptr<PgConn> conn) : fd(conn->socket()), conn_(std::move(conn)) {}

  // The connection's socket, fixed after connect: the monitor polls it without the lock (a
  // stale fd only costs a spurious check, which finds the session dead).
  const int fd;

  // Everything below `mu` is guarded by it. The monitor thread only try_locks it, and
  // skips a session whose `busy` is non-zero (a caller is running a statement on it).
  std::mutex mu;
  std::atomic<int> busy{0};  // callers inside or waiting for a SessionUse
  std::atomic<bool> dead{false};  // the connection ended or was closed: never reused
  // Set by the monitor when this socket woke it while a caller was using the session (the
  // caller's own reply): left out of the monitor's poll set until the next poke or rescan,
  // so a busy session does not wake the monitor on every statement (SessionPool).
  std::atomic<bool> unwatched{false};
  spi::SessionHolds holds;        // thread-safe on its own

  PgConn* conn() noexcept { return conn_.get(); }
  // Closes the connection: the server frees every lock of the session as soon as it reads
  // the close, and may grant them elsewhere at once. So every hold on it is marked lost
  // first (their lost signals fire here, before the close is sent, on this thread: the
  // core hands whatever a lost callback starts to its own threads). REQUIRES: mu held.
  void close_locked() noexcept {
    holds.mark_all_lost();
    conn_.reset();
    dead.store(true);
  }

  WaitState wait_state = WaitState::none;
  ResultPtr wait_result;       // the finished wait's result, null if the connection broke
  std::function<void()> wake;  // the waiting acquire's wake-up
  // When the monitor read the wait's result: the session went idle on the server just before.
  std::chrono::steady_clock::time_point wait_answered_at;
  // The wait in flight has ended (its result is ready, or `alive` is false: the connection
  // broke): keeps its result for the acquire and marks it done. Closes the connection when
  // there is no result; returns true then (the caller forgets the session after unlocking).
  // REQUIRES: mu held, wait_state == in_flight.
  bool finish_wait_locked(bool alive) noexcept {
    wait_result.reset();
    if (alive) {
      try {
        wait_result = conn_->take_result();
      } catch (const Error&) {
      }
    }
    const bool killed = !wait_result;
    if (killed) close_locked();
    wait_state = WaitState::done;
    wait_answered_at = std::chrono::steady_clock::now();
    return killed;
  }

  // Pool bookkeeping, guarded by the pool's mutex (never taken while `mu` is held).
  std::set<std::int64_t> keys;  // held or being tried here: never two holds of one key
  bool dedicated = false;       // reserved for one acquire's blocking wait
  int users = 0;                // callers about to run or running a statement

 private:
  std::unique_ptr<PgConn> conn_;
};

// Marks a session busy and locks it for one statement (RAII). With std::try_to_lock it never
// waits: owns() says whether the session was free.
class SessionUse {
 public:
  explicit SessionUse(Session& s) : s_(s), owns_(true) {
    s_.busy.fetch_add(1);
    s_.mu.lock();
  }
  SessionUse(Session& s, std::try_to_lock_t) : s_(s) {
    s_.busy.fetch_add(1);
    owns_ = s_.mu.try_lock();
    if (!owns_) s_.busy.fetch_sub(1);
  }
  ~SessionUse() {
    if (!owns_) return;
    s_.mu.unlock();
    s_.busy.fetch_sub(1);
  }
  SessionUse(const SessionUse&) = delete;
  SessionUse& operator=(const SessionUse&) = delete;
  bool owns() const noexcept { return owns_; }

 private:
  Session& s_;
  bool owns_ = false;
};

}  // namespace dlock::postgres
