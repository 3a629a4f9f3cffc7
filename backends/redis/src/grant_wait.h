// Push hand-over: a waiter blocks in BLPOP on its own grant list, on a connection of its own,
// with its pick-up script (lua/pickup.lua) pipelined behind it. A release that hands the lock
// over pushes the fencing token to the head waiter's list: the server answers that one BLPOP
// (no other waiter wakes) and runs the pick-up at once, so the grant arrives with its full
// lease and no further round trip. The waiting thread polls the connection's descriptor
// itself (spi::Acquisition::wait_fd) and reads the answer on its own thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "connection.h"
#include "scripts.h"

namespace dlock::redis {

// Thread safety: none (one acquisition's wait, used by the thread that waits).
class GrantWait {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { waiting, granted, failed };
  // What the wait found; `sent` is when the request that answered left (the lease of a
  // grant runs from after it).
  struct Result {
    State state = State::waiting;
    std::uint64_t token = 0;
    Clock::time_point sent{};
  };

  // Sends BLPOP on `grants` (timeout: `heartbeat`) and the pick-up of `owner`'s hold of the
  // lock (writer's hold `hold`) for `lease` on `conn`, which must be idle. `before`, if set,
  // queues commands that go first, in the same write, and are answered with no reply (the
  // silent first attempt: RedisBackend::append_silent_acquire).
  // Throws Error(unavailable) if sending fails.
  GrantWait(std::unique_ptr<Connection> conn, const Scripts& scripts, std::string hold, std::string grants,
            std::string_view owner, std::chrono::milliseconds lease, std::chrono::milliseconds heartbeat,
            const std::function<void(Connection&)>& before = {});
  // Closing the connection mid-BLPOP ends the BLPOP on the server. Never throws.
  ~GrantWait() = default;
  GrantWait(const GrantWait&) = delete;
  GrantWait& operator=(const GrantWait&) = delete;

  // The descriptor that becomes readable when an answer arrives.
  int fd() const noexcept;
  // Reads what has arrived, without blocking. A BLPOP that only timed out is sent again
  // (state waiting). A grant or a failure is final: poll() must not be called again.
  // Never throws.
  Result poll() noexcept;
  // The connection, once a grant was read: both requests answered, so it is idle and can
  // serve the next wait. Null otherwise.
  std::unique_ptr<Connection> take_idle_connection() noexcept;
  // Whether any reply was read: the server then ran what `before` queued (one connection's
  // requests run in order).
  bool answered() const noexcept { return answered_; }

 private:
  void send();
  // Reads the replies in the buffer; returns the final state, or waiting for more.
  State read_replies() noexcept;

  std::unique_ptr<Connection> conn_;
  const Scripts& scripts_;
  const std::string hold_, grants_, owner_, lease_, blpop_timeout_;
  Clock::time_point sent_{};
  int replies_ = 0;                      // of the two in flight
  std::optional<std::uint64_t> popped_;  // the BLPOP's token
  bool granted_ = false;
  bool answered_ = false;
};

}  // namespace dlock::redis
