#include "pool.h"

#include <algorithm>

namespace dlock::redis {

using Clock = std::chrono::steady_clock;

void ConnectionPool::add(std::unique_ptr<Connection> c) {
  std::lock_guard lock(mu_);
  ++open_;
  c->idle_since = Clock::now();
  idle_.push_back(std::move(c));
}

ConnectionPool::Handle ConnectionPool::take(Clock::time_point bound) { return take(bound, false); }

ConnectionPool::Handle ConnectionPool::take_fresh(Clock::time_point bound) { return take(bound, true); }

ConnectionPool::Handle ConnectionPool::take(Clock::time_point bound, bool fresh) {
  std::unique_lock lock(mu_);
  const auto deadline = std::min(bound, Clock::now() + options_.command_timeout);
  if (fresh) {
    open_ -= idle_.size();
    idle_.clear();
  }
  for (;;) {
    while (!idle_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      // A connection the server closed while it sat idle (restart, timeout) is dropped here
      // rather than failing a command that could not be retried safely. Checked only after
      // a pause, to keep the busy path free of system calls (always for a fresh one).
      const bool rested = fresh || Clock::now() - c->idle_since > std::chrono::milliseconds(200);
      if (c->broken() || (rested && c->stale())) {
        --open_;
        continue;
      }
      return Handle(this, std::move(c));
    }
    if (open_ < options_.pool) break;
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= options_.pool) {
      throw Error(ErrorCode::unavailable, options_.where + ": all " + std::to_string(options_.pool) +
                                              " pooled connections stayed busy (raise pool=)");
    }
  }
  if (last_error_ && Clock::now() < retry_at_) throw *last_error_;
  ++open_;
  lock.unlock();
  try {
    std::unique_ptr<Connection> c;
    if (bound == Clock::time_point::max()) {
      c = Connection::open(options_);
    } else {
      RedisOptions o = options_;
      const auto left = std::max(std::chrono::ceil<std::chrono::milliseconds>(bound - Clock::now()),
                                 std::chrono::milliseconds(1));
      o.connect_timeout = std::min(o.connect_timeout, left);
      o.command_timeout = std::min(o.command_timeout, left);
      c = Connection::open(o);
      c->set_timeout(options_.command_timeout);
    }
    lock.lock();
    backoff_ = std::chrono::milliseconds(0);
    last_error_.reset();
    return Handle(this, std::move(c));
  } catch (const Error& e) {
    lock.lock();
    --open_;
    backoff_ = std::clamp(backoff_ * 2, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
    retry_at_ = Clock::now() + backoff_;
    last_error_ = e;
    returned_.notify_one();
    throw;
  }
}

void ConnectionPool::give_back(std::unique_ptr<Connection> c) noexcept {
  std::lock_guard lock(mu_);
  if (c->broken()) {
    --open_;
    c.reset();
  } else {
    c->idle_since = Clock::now();
    idle_.push_back(std::move(c));
  }
  returned_.notify_one();
}

}  // namespace dlock::redis
