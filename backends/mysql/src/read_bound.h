// Bounds a blocking statement on a connection whose own read timeout is longer than the
// caller may wait (a waiter connection has none). Instead of running
// the statement on another thread and waiting for it there (a thread start and two thread
// hops per release of a hold that was granted by a wait), the caller runs it itself and a
// deadline is armed: when it passes, the socket is shut down, so the blocked read fails at
// once and the connection is dropped (closing it ends its transaction on the server).
// The deadline holds its own reference to the socket (a duplicate fd): Connector/C closes
// its fd inside a statement whose connection the server closed, and the number may be given
// to another socket before disarm; shutdown(2) of the duplicate still reaches the right one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "dlock/support/unique_fd.h"

namespace dlock::mysql {

// Thread safety: every method may be called concurrently.
class ReadBound {
 public:
  using Clock = std::chrono::steady_clock;

  ReadBound();
  // Stops and joins the deadline thread. Armed deadlines are dropped unfired.
  ~ReadBound();
  ReadBound(const ReadBound&) = delete;
  ReadBound& operator=(const ReadBound&) = delete;

  // Shuts the socket `fd` names now down (both directions) at `deadline` unless disarmed
  // first; `before_shutdown`, if given, runs on the deadline thread right before (not under
  // any lock of this class). The socket, not the number: `fd` may be closed and its number
  // reused before disarm. Returns the id for disarm(), or 0 if nothing was armed (no fd left
  // for the duplicate: EMFILE). Costs one fcntl(F_DUPFD_CLOEXEC) here and one close(2) at
  // disarm or firing; no thread wake-up unless this deadline is the earliest one.
  // REQUIRES: `fd` is open and names the socket to bound for the duration of this call.
  std::uint64_t arm(int fd, Clock::time_point deadline,
                    std::function<void()> before_shutdown = {});
  // Disarms `id` (0: nothing). Returns true if its deadline had fired (the socket was shut
  // down); waits for a firing under way to end. After this returns, the socket is never
  // touched again for this id, and this class holds no reference to it.
  bool disarm(std::uint64_t id);

 private:
  void run();

  struct Entry {
    support::UniqueFd socket;  // our own reference: closed when the entry goes
    Clock::time_point deadline;
    std::function<void()> before_shutdown;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, Entry> armed_;  // guarded by mu_
  std::set<std::uint64_t> firing_;        // guarded by mu_: being shut down right now
  std::set<std::uint64_t> fired_;         // guarded by mu_: fired, not yet disarmed
  std::uint64_t next_id_ = 1;             // guarded by mu_
  Clock::time_point wake_at_ = Clock::time_point::max();  // guarded by mu_: the thread's plan
  bool stop_ = false;                     // guarded by mu_
  std::thread thread_;
};

}  // namespace dlock::mysql
