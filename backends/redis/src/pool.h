// A small pool of command connections: each is used by one thread at a time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "connection.h"
#include "dlock/error.h"
#include "options.h"

namespace dlock::redis {

// Thread safety: all methods are thread-safe.
class ConnectionPool {
 public:
  // A borrowed connection; gives it back on destruction (drops it if broken).
  class Handle {
   public:
    Handle(ConnectionPool* pool, std::unique_ptr<Connection> c) noexcept : pool_(pool), c_(std::move(c)) {}
    Handle(Handle&&) noexcept = default;
    Handle& operator=(Handle&&) = delete;
    ~Handle() { if (c_) pool_->give_back(std::move(c_)); }
    Connection& operator*() const noexcept { return *c_; }
    Connection* operator->() const noexcept { return c_.get(); }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Connection> c_;
  };

  // REQUIRES: options outlives the pool.
  explicit ConnectionPool(const RedisOptions& options) : options_(options) {}

  // Adds an already open connection (the factory's first one).
  void add(std::unique_ptr<Connection> c);

  // Lends an idle connection, or opens one while fewer than options.pool are open;
  // otherwise waits up to command_timeout for one to come back.
  // Throws Error(unavailable) when connecting fails (after a failure, further connects are
  // refused at once until a backoff of 50 ms doubling to 1 s has passed, with the same
  // message), or when no connection came back in time; invalid_argument for auth/db errors.
  // With a deadline, opening a connection (connect and the first replies) and waiting for
  // a free one are bounded by it too.
  Handle take(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  // For the retry after the server closed a connection: the idle ones share its fate (a
  // CLIENT KILL, a restart, a failover closes them all, and one that rested less than the
  // pool's check interval is not checked), so every idle connection is dropped and a newly
  // opened one is lent (or, while every slot is lent, the first one given back that the
  // server has not closed). Same failures and bounds as take().
  Handle take_fresh(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

 private:
  Handle take(std::chrono::steady_clock::time_point deadline, bool fresh);
  void give_back(std::unique_ptr<Connection> c) noexcept;
  std::unique_ptr<Connection> connect();

  const RedisOptions& options_;
  std::mutex mu_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t open_ = 0;  // idle + lent + being opened
  // Reconnect backoff after a failed connect.
  std::chrono::steady_clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  std::optional<Error> last_error_;
};

}  // namespace dlock::redis
