#include "read_bound.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>

namespace dlock::mysql {

ReadBound::ReadBound() : thread_([this] { run(); }) {}

ReadBound::~ReadBound() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::uint64_t ReadBound::arm(int fd, Clock::time_point deadline,
                             std::function<void()> before_shutdown) {
  support::UniqueFd socket(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!socket.valid()) return 0;
  bool sooner = false;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    armed_.emplace(id, Entry{std::move(socket), deadline, std::move(before_shutdown)});
    sooner = deadline < wake_at_;
  }
  if (sooner) cv_.notify_all();
  return id;
}

bool ReadBound::disarm(std::uint64_t id) {
  std::unique_lock lock(mu_);
  auto unfired = armed_.extract(id);  // its duplicate is closed after the lock is let go
  cv_.wait(lock, [&] { return firing_.count(id) == 0; });
  const bool fired = fired_.erase(id) > 0;
  lock.unlock();
  return fired;
}

void ReadBound::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const auto now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second.deadline <= now) {
        // Out of the lock (the callback may fire lost signals, whose callbacks may arm);
        // disarm(id) waits meanwhile.
        const std::uint64_t id = it->first;
        Entry e = std::move(it->second);
        armed_.erase(it);
        firing_.insert(id);
        lock.unlock();
        if (e.before_shutdown) e.before_shutdown();
        ::shutdown(e.socket.get(), SHUT_RDWR);  // the blocked read fails at once
        e.socket.reset();
        lock.lock();
        firing_.erase(id);
        fired_.insert(id);
        cv_.notify_all();
        it = armed_.begin();  // the map may have changed meanwhile: look again
        next = Clock::time_point::max();
      } else {
        next = std::min(next, it->second.deadline);
        ++it;
      }
    }
    wake_at_ = next;
    // Disarmed entries leave the plan as it is: the next wake-up re-plans. In a steady stream
    // of statements each deadline is later than the planned one, so arming wakes nobody.
    if (next == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
  }
}

}  // namespace dlock::mysql
