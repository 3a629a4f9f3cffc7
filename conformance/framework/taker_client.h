// Drives one dlock_conformance_taker child process (see conformance/taker/taker_main.cpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "framework/safety_checker.h"

namespace dlock::conformance {

// Not thread-safe: one thread drives one taker. Every read has a timeout: a silent child is
// an error (std::runtime_error), never a hang. The destructor SIGKILLs a child still running.
class Taker {
 public:
  // Starts the taker on `uri` and waits for it to open its provider. Throws
  // std::runtime_error if it cannot start or reports an error.
  explicit Taker(const std::string& uri, std::chrono::milliseconds ready_timeout = std::chrono::seconds(10));
  ~Taker();
  Taker(const Taker&) = delete;
  Taker& operator=(const Taker&) = delete;

  struct Acquired {
    std::uint64_t token = 0;
    std::int64_t start_ns = 0;
  };
  // Empty optional for "busy". Throws std::runtime_error for an error reply (its text).
  // wait < 0 means forever; lease 0 means the provider's default (renewed) lease.
  std::optional<Acquired> acquire(std::string_view name, std::chrono::milliseconds wait,
                                  std::chrono::milliseconds lease = std::chrono::milliseconds(0),
                                  bool shared = false);
  // Releases the most recent hold; returns its answer and the time it was called.
  bool release(std::int64_t* end_ns = nullptr);
  bool lost();
  // Runs the lost-update loop; records every hold in `checker` under `label`.
  void increment(std::string_view name, const std::string& counter_file, int n,
                 SafetyChecker& checker, const std::string& label,
                 std::chrono::milliseconds timeout);
  // The child exits without releasing.
  void abandon();
  // The taker starts `sleep 600` as a service starts a helper (fork + exec, no descriptor
  // closed). Its pid (the caller kills it: it is not this process's child), and the
  // descriptors it inherited that the taker did not inherit itself ("fd=target,...", or "-").
  struct Spawned {
    pid_t pid = -1;
    std::string inherited;
  };
  // Throws std::runtime_error for another reply than "spawned".
  Spawned spawn();
  // SIGKILL, reaped. Returns the time the signal was sent.
  std::int64_t kill9();
  pid_t pid() const noexcept { return pid_; }

  // The raw protocol: sends `line`, returns the next reply line.
  std::string command(const std::string& line, std::chrono::milliseconds timeout);
  std::string read_line(std::chrono::milliseconds timeout);
  // Sends `line` without waiting for its reply.
  void send(const std::string& line);

 private:
  void reap();

  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

// The taker binary's path (set at build time).
std::string taker_path();

}  // namespace dlock::conformance
