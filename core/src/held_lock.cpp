#include "dlock/spi/held_lock.h"

namespace dlock::spi {

HeldLock::HeldLock(std::string name, LockMode mode, std::string owner_key,
                   std::uint64_t fencing_token, Clock::time_point expires_at)
    : name_(std::move(name)),
      mode_(mode),
      owner_key_(std::move(owner_key)),
      token_(fencing_token),
      expires_at_(expires_at.time_since_epoch().count()) {}

HeldLock::Clock::time_point HeldLock::expires_at() const noexcept {
  return Clock::time_point(Clock::duration(expires_at_.load(std::memory_order_acquire)));
}

void HeldLock::set_expires_at(Clock::time_point t) noexcept {
  expires_at_.store(t.time_since_epoch().count(), std::memory_order_release);
}

void HeldLock::mark_lost() noexcept { lost_.request_stop(); }

}  // namespace dlock::spi
