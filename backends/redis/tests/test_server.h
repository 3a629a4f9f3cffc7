// Test helpers for the redis integration tests: the shared test server, raw commands, and a
// private server for tests that reconfigure it (auth, SCRIPT FLUSH, READONLY, OOM).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "connection.h"
#include "redis_backend.h"

namespace dlock::redis::test {

// DLOCK_TEST_REDIS_URI, or empty when unset (the fixtures then fail with a clear message).
std::string shared_uri();
extern const char* const kNoServerMessage;

// A key prefix no other test run uses: "dlock-test:<pid>:<random>:".
std::string unique_prefix();

// `uri` with `params` ("a=1&b=2") appended.
std::string with_params(const std::string& uri, const std::string& params);

// Raw commands on a server, to look at and change its state.
class Raw {
 public:
  explicit Raw(const std::string& uri);
  Reply cmd(std::initializer_list<std::string_view> args);
  long long integer(std::initializer_list<std::string_view> args);
  std::optional<std::string> string(std::initializer_list<std::string_view> args);
  // Whether `owner` holds the lock whose writer's hold is `hold` (README.md, "Key layout"):
  // as its writer (the hold names it) or as one of its readers (in <hold>:r).
  bool holds(const std::string& hold, std::string_view owner);

 private:
  RedisOptions options_;
  std::unique_ptr<Connection> c_;
};

// Marks the dataset under `prefix` as initialised (SET <prefix>epoch 0), as an operator does
// on a fresh server, so that the first acquire does not wait for the data-loss pause.
void mark_dataset(Raw& raw, const std::string& prefix);

using HeldPtr = std::shared_ptr<spi::HeldLock>;

// An acquire request that owns its strings (spi::AttemptRequest only views them).
struct Req {
  std::string name;
  std::string owner;
  LockMode mode = LockMode::exclusive;
  std::chrono::milliseconds lease = std::chrono::seconds(10);
  bool fair = false;
  bool will_wait = false;
  std::string waiter = {};  // empty: the owner key

  spi::AttemptRequest get() const;
};

// One acquire call driven as the core drives it: begin_acquire, attempt() while it is busy,
// then destroy (which abandons unless an attempt granted).
class Acquire {
 public:
  Acquire(spi::Backend& backend, Req req, std::function<void()> wake = [] {});
  spi::Attempt attempt() { return acq_->attempt(); }
  // One attempt: the grant, or null when busy.
  HeldPtr try_get();
  std::chrono::milliseconds fallback_poll() const { return acq_->fallback_poll(); }
  // Whether the wake-up came within `within`: the acquisition's wait_fd() became readable
  // (the core then makes the next attempt). False when it has no descriptor.
  bool woken(std::chrono::milliseconds within) const;
  const Req& req() const { return req_; }

 private:
  const Req req_;
  const spi::AttemptRequest view_;
  std::unique_ptr<spi::Acquisition> acq_;
};

// A redis-server of our own on a unix socket in a temp dir; stopped by the destructor.
class PrivateServer {
 public:
  // `extra_args`: more redis-server options (e.g. {"--enable-debug-command", "local"} for
  // DEBUG SLEEP, Redis >= 7), kept across restart().
  explicit PrivateServer(std::vector<std::string> extra_args = {});
  ~PrivateServer();
  PrivateServer(const PrivateServer&) = delete;
  PrivateServer& operator=(const PrivateServer&) = delete;
  bool running() const { return pid_ > 0; }
  // Stops the server (its data is lost: no persistence) and starts it again on the same
  // socket. Returns whether it answers again.
  bool restart();
  const std::string& socket() const { return socket_; }
  // redis+unix:///…/redis.sock
  std::string uri() const { return "redis+unix://" + socket_; }

 private:
  void start();
  void stop();
  std::vector<std::string> extra_args_;
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace dlock::redis::test
