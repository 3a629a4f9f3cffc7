#include "dlock/support/event_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace dlock::support {

EventFd::EventFd() noexcept : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

void EventFd::signal() noexcept {
  if (!fd_.valid()) return;
  const std::uint64_t one = 1;
  // EAGAIN means the counter is saturated: it is readable already.
  [[maybe_unused]] auto n = ::write(fd_.get(), &one, sizeof one);
}

bool EventFd::drain() noexcept {
  if (!fd_.valid()) return false;
  std::uint64_t count = 0;
  return ::read(fd_.get(), &count, sizeof count) == static_cast<ssize_t>(sizeof count);
}

}  // namespace dlock::support
