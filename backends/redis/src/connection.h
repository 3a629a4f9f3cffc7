// One hiredis connection: connected, authenticated and on the right database.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "hiredis_ptr.h"
#include "options.h"

namespace dlock::redis {

// (Reply, from hiredis_ptr.h, is never null when returned by Connection.)

// Thread safety: none (a hiredis context is not thread-safe); the pool hands each
// connection to one thread at a time. A connection whose transport failed is broken() for
// good and must be dropped: after a read timeout the reply may still arrive later.
class Connection {
 public:
  // Connects within options.connect_timeout, sets the read/write timeout to
  // options.command_timeout, authenticates (AUTH [user] password) and selects the db.
  // Throws Error(unavailable) when the server cannot be reached or answers too slowly,
  // Error(invalid_argument) for a wrong password or a db the server does not have.
  static std::unique_ptr<Connection> open(const RedisOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one command and reads its reply. Error replies are returned, not thrown (the
  // caller decides; see fail()). Throws Error(unavailable) on a transport failure or
  // timeout, after which broken() is true.
  Reply command(std::span<const std::string_view> args);
  // Pipelining: queue commands with append(), then flush them and read one reply per
  // command with read_reply(). Same failures as command().
  void append(std::span<const std::string_view> args);
  Reply read_reply();
  // Sends what append() queued (read_reply() does it first). Never raises SIGPIPE.
  // Throws Error(unavailable) on failure, after which broken() is true.
  void flush();

  // Throws translate_error() for `doing` with `reply` (an error reply or of a wrong type).
  [[noreturn]] void fail(std::string_view doing, const redisReply* reply) const;

  // Bounds each read and write from now on (the socket timeout); false if it could not be
  // set, after which the connection is broken.
  bool set_timeout(std::chrono::milliseconds timeout) noexcept;

  bool broken() const noexcept { return ctx_->err != 0; }
  // Broken because a read or write timed out (the server did not answer in time), rather
  // than closed or reset: asking the same server again at once would only wait again.
  bool timed_out() const noexcept { return timed_out_; }
  // True if the server already closed this idle connection (or sent something unasked).
  bool stale() const noexcept;
  // The server's run_id (INFO server), read at connect: it changes when the server restarts.
  std::string run_id;
  // When the connection was last handed back to the pool.
  std::chrono::steady_clock::time_point idle_since{};

  // For the subscriber's own event loop.
  redisContext* raw() noexcept { return ctx_; }

 private:
  Connection(redisContext* ctx, std::string where) : ctx_(ctx), where_(std::move(where)) {}
  [[noreturn]] void transport_failed(std::string_view doing);
  redisContext* ctx_;
  bool timed_out_ = false;
  std::string where_;  // "redis host:port", for messages
};

}  // namespace dlock::redis
