// HeldLock: a lock a backend granted, as the core keeps it. Backends derive from it to keep
// what they need to release it (a file descriptor, a znode path, a connection).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>

#include "dlock/options.h"

namespace dlock::spi {

// Thread safety: name/mode/owner_key/token are immutable; expiry and the lost signal are
// safe to use from any thread (the watchdog, a backend's session thread, the user).
class HeldLock {
 public:
  using Clock = std::chrono::steady_clock;

  HeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t fencing_token,
           Clock::time_point expires_at);
  virtual ~HeldLock() = default;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

  const std::string& name() const noexcept { return name_; }
  LockMode mode() const noexcept { return mode_; }
  const std::string& owner_key() const noexcept { return owner_key_; }
  std::uint64_t fencing_token() const noexcept { return token_; }

  // Client-side estimate of the server's expiry; backends set it on grant and renewal from
  // a time taken *before* sending the request. Clock::time_point::max() = no expiry.
  Clock::time_point expires_at() const noexcept;
  void set_expires_at(Clock::time_point t) noexcept;

  // Fires the lost signal: idempotent, thread-safe, never throws. Backends call it when
  // they learn the lock is gone (session expired, connection lost); the core calls it when
  // renewal finds no lock or runs out of time.
  void mark_lost() noexcept;
  bool lost() const noexcept { return lost_.stop_requested(); }
  std::stop_token lost_token() const noexcept { return lost_.get_token(); }

 private:
  const std::string name_;
  const LockMode mode_;
  const std::string owner_key_;
  const std::uint64_t token_;
  std::atomic<Clock::rep> expires_at_;
  std::stop_source lost_;
};

}  // namespace dlock::spi
