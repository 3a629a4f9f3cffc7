#include "fd_monitor.h"

#include <sys/epoll.h>

#include <cerrno>

namespace dlock::mysql {

FdMonitor::FdMonitor() : epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (epoll_fd_.valid() && stop_.valid()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;  // id 0: the stop signal
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, stop_.fd(), &ev) == 0) {
      thread_ = std::thread([this] { run(); });
    }
  }
}

FdMonitor::~FdMonitor() {
  if (thread_.joinable()) {
    stop_.signal();
    thread_.join();
  }
}

bool FdMonitor::watch(int fd, std::function<void()> on_hangup) {
  if (!thread_.joinable()) return false;
  std::lock_guard lock(mu_);
  std::erase_if(entries_, [fd](const auto& e) { return e.second.fd == fd; });
  const std::uint64_t id = next_id_++;
  epoll_event ev{};
  // EPOLLHUP and EPOLLERR are always reported. One-shot: the kernel disables the
  // registration as it reports, so none is ever removed by number (EPOLL_CTL_DEL names an
  // fd number, which may name another socket by then, while the one registered lives on
  // under another number: a fork's child, a deadline's duplicate) and a forgotten one cannot
  // report again and again (level-triggered) to a monitor that ignores it.
  ev.events = EPOLLRDHUP | EPOLLONESHOT;
  ev.data.u64 = id;
  entries_.emplace(id, Entry{fd, std::move(on_hangup)});
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    entries_.erase(id);
    return false;
  }
  return true;
}

void FdMonitor::run() {
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = events[i].data.u64;
      if (id == 0) return;  // the destructor asked us to stop
      std::function<void()> cb;
      {
        std::lock_guard lock(mu_);
        auto it = entries_.find(id);
        if (it == entries_.end()) continue;  // forgotten meanwhile (its number was reused)
        cb = std::move(it->second.on_hangup);
        entries_.erase(it);
      }
      if (cb) cb();
    }
  }
}

}  // namespace dlock::mysql
