#include "dlock/spi/session_holds.h"

#include <algorithm>

namespace dlock::spi {

void SessionHolds::prune_locked() const noexcept {
  std::erase_if(holds_, [](const std::weak_ptr<HeldLock>& h) { return h.expired(); });
}

void SessionHolds::add(const std::shared_ptr<HeldLock>& lock) {
  {
    std::lock_guard guard(mu_);
    if (!ended_) {
      if (holds_.size() >= 64) prune_locked();  // released holds linger as expired entries
      holds_.push_back(lock);
      return;
    }
  }
  lock->mark_lost();  // granted on a session that has ended meanwhile
}

void SessionHolds::remove(const HeldLock& lock) noexcept {
  std::lock_guard guard(mu_);
  std::erase_if(holds_, [&](const std::weak_ptr<HeldLock>& h) {
    auto p = h.lock();
    return !p || p.get() == &lock;
  });
}

void SessionHolds::refresh(Clock::time_point expiry) noexcept {
  std::lock_guard guard(mu_);
  for (auto& h : holds_) {
    if (auto p = h.lock()) p->set_server_expiry(expiry);
  }
}

std::size_t SessionHolds::mark_all_lost() noexcept {
  std::vector<std::weak_ptr<HeldLock>> holds;
  {
    std::lock_guard guard(mu_);
    ended_ = true;
    holds.swap(holds_);
  }
  std::size_t n = 0;
  const Clock::time_point now = Clock::now();
  for (auto& h : holds) {
    if (auto p = h.lock()) {
      p->set_server_expiry(now);
      p->mark_lost();  // callbacks run here, outside our mutex
      ++n;
    }
  }
  return n;
}

bool SessionHolds::ended() const noexcept {
  std::lock_guard guard(mu_);
  return ended_;
}

std::vector<std::shared_ptr<HeldLock>> SessionHolds::live() const {
  std::lock_guard guard(mu_);
  std::vector<std::shared_ptr<HeldLock>> out;
  for (auto& h : holds_) {
    if (auto p = h.lock()) out.push_back(std::move(p));
  }
  return out;
}

std::size_t SessionHolds::size() const noexcept {
  std::lock_guard guard(mu_);
  prune_locked();
  return holds_.size();
}

}  // namespace dlock::spi
