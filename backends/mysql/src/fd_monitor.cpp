#include "fd_monitor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <vector>

namespace dlock::mysql {

FdMonitor::FdMonitor() : event_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  thread_ = std::thread([this] { run(); });
}

FdMonitor::~FdMonitor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  poke();
  thread_.join();
  if (event_fd_ >= 0) ::close(event_fd_);
}

void FdMonitor::poke() noexcept {
  if (event_fd_ < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
}

std::uint64_t FdMonitor::watch(int fd, std::function<void()> on_hangup) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    entries_.emplace(id, Entry{fd, std::move(on_hangup)});
  }
  poke();
  return id;
}

void FdMonitor::unwatch(std::uint64_t id) noexcept {
  {
    std::lock_guard lock(mu_);
    entries_.erase(id);
  }
  poke();
}

void FdMonitor::run() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  for (;;) {
    fds.clear();
    ids.clear();
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      fds.push_back({event_fd_, POLLIN, 0});
      ids.push_back(0);
      for (const auto& [id, e] : entries_) {
        fds.push_back({e.fd, POLLRDHUP, 0});
        ids.push_back(id);
      }
    }
    // The eventfd wakes us on every change; the timeout is only a safety net.
    const int n = ::poll(fds.data(), fds.size(), event_fd_ >= 0 ? 1000 : 50);
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      std::uint64_t v = 0;
      [[maybe_unused]] auto r = ::read(event_fd_, &v, sizeof v);
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0) continue;
      std::function<void()> cb;
      {
        std::lock_guard lock(mu_);
        auto it = entries_.find(ids[i]);
        if (it == entries_.end()) continue;  // unwatched meanwhile (the fd may be reused)
        cb = std::move(it->second.on_hangup);
        entries_.erase(it);
      }
      if (cb) cb();
    }
  }
}

}  // namespace dlock::mysql
