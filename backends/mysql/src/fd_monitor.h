// Watches the sockets of pinned connections for hang-up (POLLRDHUP), so a KILL CONNECTION or
// a server restart reaches the holder within milliseconds instead of at the next probe
// (brief §1.1). It only polls: it never reads, so it never disturbs Connector/C++.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace dlock::mysql {

class FdMonitor {
 public:
  FdMonitor();
  ~FdMonitor();  // joins the thread
  FdMonitor(const FdMonitor&) = delete;
  FdMonitor& operator=(const FdMonitor&) = delete;

  // Calls `on_hangup` once (from the monitor thread) when `fd` reports POLLRDHUP, POLLHUP or
  // POLLERR. Returns an id for unwatch. REQUIRES: fd stays open until unwatch returns.
  std::uint64_t watch(int fd, std::function<void()> on_hangup);
  // Stops watching; after it returns the callback is not started any more (a call already
  // running may finish). Unknown ids are ignored.
  void unwatch(std::uint64_t id) noexcept;

 private:
  void run();
  void poke() noexcept;

  struct Entry {
    int fd;
    std::function<void()> on_hangup;
  };
  std::mutex mu_;
  std::map<std::uint64_t, Entry> entries_;  // guarded by mu_
  std::uint64_t next_id_ = 1;               // guarded by mu_
  bool stop_ = false;                       // guarded by mu_
  int event_fd_ = -1;
  std::thread thread_;
};

}  // namespace dlock::mysql
