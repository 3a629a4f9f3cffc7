// Watches the sockets of pinned connections for hang-up (EPOLLRDHUP), so a KILL CONNECTION or
// a server restart reaches the holder within milliseconds instead of at the next probe
// (brief §1.1). It only polls: it never reads, so it never disturbs Connector/C++.
// watch/unwatch are epoll_ctl calls from the caller's thread: they do not wake the monitor
// thread, which costs nothing on the acquire/release path.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "dlock/support/event_fd.h"
#include "dlock/support/unique_fd.h"

namespace dlock::mysql {

class FdMonitor {
 public:
  FdMonitor();
  ~FdMonitor();  // joins the thread
  FdMonitor(const FdMonitor&) = delete;
  FdMonitor& operator=(const FdMonitor&) = delete;

  // Calls `on_hangup` once (from the monitor thread) when `fd` reports EPOLLRDHUP, EPOLLHUP
  // or EPOLLERR. Returns an id for unwatch (0 if the fd could not be watched: then only
  // probes notice). REQUIRES: fd stays open until unwatch returns.
  std::uint64_t watch(int fd, std::function<void()> on_hangup);
  // Stops watching; after it returns the callback is not started any more (a call already
  // running may finish). Unknown ids are ignored.
  void unwatch(std::uint64_t id) noexcept;

 private:
  void run();

  struct Entry {
    int fd;
    std::function<void()> on_hangup;
  };
  std::mutex mu_;
  std::map<std::uint64_t, Entry> entries_;  // guarded by mu_
  std::uint64_t next_id_ = 1;               // guarded by mu_
  support::UniqueFd epoll_fd_;
  support::EventFd stop_;  // only the destructor signals it
  std::thread thread_;
};

}  // namespace dlock::mysql
