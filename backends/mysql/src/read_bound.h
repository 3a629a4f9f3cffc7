// Bounds a blocking statement on a connection whose own read timeout is longer than the
// caller may wait (a waiter connection has none). Instead of running
// the statement on another thread and waiting for it there (a thread start and two thread
// hops per release of a hold that was granted by a wait), the caller runs it itself and a
// deadline is armed: when it passes, the socket is shut down, so the blocked read fails at
// once and the connection is dropped (closing it ends its transaction on the server).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

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

  // Shuts `fd` down (both directions) at `deadline` unless disarmed first; `before_shutdown`,
  // if given, runs on the deadline thread right before (not under any lock of this class).
  // Returns the id for disarm(). Arming costs no thread wake-up unless this deadline is the
  // earliest one.
  std::uint64_t arm(int fd, Clock::time_point deadline,
                    std::function<void()> before_shutdown = {});
  // Disarms `id`. Returns true if its deadline had fired (the socket was shut down); waits
  // for a firing under way to end. After this returns, `fd` is never touched again for this id.
  bool disarm(std::uint64_t id);

 private:
  void run();

  struct Entry {
    int fd;
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
