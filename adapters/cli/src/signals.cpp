#include "signals.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dlock/error.h"

namespace dlock::cli {

SignalFd::SignalFd() {
  // An inherited SIG_IGN for SIGCHLD would reap the child behind our back.
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwardedSignals) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  if (::pthread_sigmask(SIG_BLOCK, &set, &original_) != 0) {
    throw Error(ErrorCode::internal, "cannot block signals");
  }
  fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &original_, nullptr);
    throw Error(ErrorCode::internal, std::string("signalfd: ") + std::strerror(err));
  }
}

// The signals stay blocked: unblocking now would let a late SIGTERM kill dlock before it
// reports the command's exit status.
SignalFd::~SignalFd() { ::close(fd_); }

std::optional<int> SignalFd::read() noexcept {
  signalfd_siginfo info{};
  ssize_t n;
  do {
    n = ::read(fd_, &info, sizeof info);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof info)) return std::nullopt;
  return static_cast<int>(info.ssi_signo);
}

EventFd::EventFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw Error(ErrorCode::internal, std::string("eventfd: ") + std::strerror(errno));
}

EventFd::~EventFd() { ::close(fd_); }

void EventFd::notify() const noexcept {
  std::uint64_t one = 1;
  ssize_t n;
  do {
    n = ::write(fd_, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
}

int wait_readable(std::initializer_list<int> fds, std::optional<std::chrono::milliseconds> timeout) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back(pollfd{fd, POLLIN, 0});
  int ms = -1;
  if (timeout) ms = static_cast<int>(std::clamp<std::int64_t>(timeout->count(), 0, 1 << 30));
  int n = ::poll(p.data(), p.size(), ms);
  if (n <= 0) return -1;  // timeout or EINTR: the caller rechecks its own deadline
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i].revents != 0) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace dlock::cli
