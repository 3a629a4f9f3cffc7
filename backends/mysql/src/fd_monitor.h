// Watches the sockets of lock connections for hang-up (EPOLLRDHUP), so a KILL CONNECTION or
// a server restart reaches the holder within milliseconds instead of at the next probe
// (brief §1.1). It only polls: it never reads, so it never disturbs Connector/C++.
// Each connection is watched once, for its lifetime (Pool): no system call on the acquire
// and release path. A closed socket leaves epoll's interest list by itself (the kernel drops
// it with the last reference to the socket), so nothing is unwatched by hand, and a watch
// reports once (EPOLLONESHOT): nothing is ever removed by fd number either.
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
  // or EPOLLERR. False if the fd could not be watched (then only probes notice). An earlier
  // watch of the same fd number is forgotten: that socket was closed, or the number would
  // not have been handed out again. The callback must not outlive what it refers to by
  // itself (hold a weak_ptr): it may run until that socket is closed.
  bool watch(int fd, std::function<void()> on_hangup);

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
