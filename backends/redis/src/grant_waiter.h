// Push hand-over: a waiter blocks in BLPOP on its own grant list, on a dedicated connection,
// with its pick-up script (lua/pickup.lua) pipelined behind it. A release that hands the lock
// over pushes the fencing token to the head waiter's list: the server answers that one BLPOP
// (no other waiter wakes) and runs the pick-up at once, so the grant arrives with its full
// lease and no further round trip. One thread per provider reads every waiting connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "connection.h"
#include "dlock/support/event_fd.h"
#include "dlock/spi/fork_guard.h"
#include "options.h"
#include "scripts.h"

namespace dlock::redis {

// Thread safety: every method is thread-safe. Wake callbacks run on the waiter thread and
// must not call back into the backend.
class GrantWaiter {
 public:
  using Clock = std::chrono::steady_clock;

  // One acquisition's blocking request.
  struct Wait {
    enum class State { waiting, granted, failed };
    // What the request found; `sent` is when the request that answered left (the lease of
    // a grant runs from after it).
    struct Result {
      State state = State::waiting;
      std::uint64_t token = 0;
      Clock::time_point sent{};
    };
    // Takes the result (a grant or a failure is reported once).
    Result take();

    std::string hash, readers, grants, owner, lease;  // kept for re-sending
    std::function<void()> wake;
    std::mutex m;                        // held while calling wake, so stop() waits for it
    bool active = true;                  // guarded by m
    Result result;                       // guarded by m
    // Owned by the waiter thread while the wait is registered.
    std::unique_ptr<Connection> conn;
    Clock::time_point sent{};
    int replies = 0;                     // of the two in flight
    std::optional<std::uint64_t> popped; // the BLPOP's token
  };

  GrantWaiter(RedisOptions options, const Scripts& scripts);
  // Stops and joins the thread (a forked child leaks it). Never throws.
  ~GrantWaiter();
  GrantWaiter(const GrantWaiter&) = delete;
  GrantWaiter& operator=(const GrantWaiter&) = delete;

  // Sends BLPOP on `grant_list` (timeout: fair_heartbeat) and the pick-up of `owner_key`'s
  // hold of the lock (`hash`, `readers`) for `lease`, on an idle connection (opened if none),
  // and watches for the answer: a grant or a failure calls `wake`. When the BLPOP times out
  // with nothing granted, both are sent again. Throws Error(unavailable) if no connection
  // could be opened.
  std::shared_ptr<Wait> start(const std::string& hash, const std::string& readers, const std::string& grant_list,
                              std::string_view owner_key, std::chrono::milliseconds lease,
                              std::function<void()> wake);
  // Unregisters `w`: its wake is never called after this returns; a connection still
  // blocked in its BLPOP is closed (the server drops the BLPOP with it). Never throws.
  void stop(const std::shared_ptr<Wait>& w) noexcept;

 private:
  void run() noexcept;
  void send(Wait& w);
  // Reads what arrived on w's connection. Returns true when w is finished (granted/failed).
  bool read(Wait& w) noexcept;
  static void finish(Wait& w, Wait::State state, std::uint64_t token) noexcept;

  const RedisOptions options_;
  const Scripts& scripts_;
  const std::string blpop_timeout_;  // seconds, as BLPOP takes it
  std::mutex mu_;
  std::vector<std::shared_ptr<Wait>> waits_;           // guarded by mu_
  std::vector<std::unique_ptr<Connection>> idle_;      // guarded by mu_
  bool stop_ = false;                                  // guarded by mu_
  support::EventFd event_;
  spi::ForkGuard fork_guard_;
  std::unique_ptr<std::thread> thread_;                // started on the first start()
};

}  // namespace dlock::redis
