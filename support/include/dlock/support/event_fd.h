// EventFd: a wake-up another thread can poll(2) on (an eventfd), for threads that block in
// poll on sockets or inotify and must be told to look again or to stop.
#pragma once

#include "dlock/support/unique_fd.h"

namespace dlock::support {

// Thread-safe: signal() from any thread, drain() from the polling thread.
class EventFd {
 public:
  // Never throws: without a descriptor (EMFILE…) valid() is false and signal() does nothing,
  // so the caller must fall back to a timeout.
  EventFd() noexcept;
  bool valid() const noexcept { return fd_.valid(); }
  // The descriptor to poll for POLLIN.
  int fd() const noexcept { return fd_.get(); }
  // Makes fd() readable until the next drain(). Async-signal-safe.
  void signal() noexcept;
  // Makes fd() unreadable again; returns whether it had been signalled.
  bool drain() noexcept;

 private:
  UniqueFd fd_;
};

}  // namespace dlock::support
