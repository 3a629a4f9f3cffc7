#include "dlock/spi/held_lock.h"

#include <algorithm>

#include "lost_signal.h"

namespace dlock::spi {
namespace {
using Clock = HeldLock::Clock;
Clock::time_point from_rep(Clock::rep r) { return Clock::time_point(Clock::duration(r)); }
}  // namespace

HeldLock::HeldLock(std::string name, LockMode mode, std::string owner_key,
                   std::uint64_t fencing_token, Clock::time_point server_expiry)
    : name_(std::move(name)),
      mode_(mode),
      owner_key_(std::move(owner_key)),
      token_(fencing_token),
      server_expiry_(server_expiry.time_since_epoch().count()),
      client_expiry_(Clock::time_point::max().time_since_epoch().count()) {}

Clock::time_point HeldLock::expires_at() const noexcept {
  return std::min(server_expiry(), client_expiry());
}

Clock::time_point HeldLock::server_expiry() const noexcept {
  return from_rep(server_expiry_.load(std::memory_order_acquire));
}

void HeldLock::set_server_expiry(Clock::time_point t) noexcept {
  server_expiry_.store(t.time_since_epoch().count(), std::memory_order_release);
}

Clock::time_point HeldLock::client_expiry() const noexcept {
  return from_rep(client_expiry_.load(std::memory_order_acquire));
}

void HeldLock::set_client_expiry(Clock::time_point t) noexcept {
  client_expiry_.store(t.time_since_epoch().count(), std::memory_order_release);
}

void HeldLock::mark_lost() noexcept { detail::fire_lost_signal(lost_); }

}  // namespace dlock::spi
