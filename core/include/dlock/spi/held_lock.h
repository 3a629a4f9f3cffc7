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

// Two expiries: the backend's estimate of when the server frees the lock (lease backends:
// when the TTL runs out; session backends: the last answered request + S - drift), and the
// client-enforced end of an explicit lease on a session backend (set by the core only).
// expires_at() is the earlier: the lost signal fires a margin before it.
//
// Thread safety: name/mode/owner_key/token are immutable; expiries and the lost signal are
// safe to use from any thread (the watchdog, a backend's session thread, the user).
class HeldLock {
 public:
  using Clock = std::chrono::steady_clock;

  // `server_expiry`: Clock::time_point::max() when nothing on the server expires it.
  HeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t fencing_token,
           Clock::time_point server_expiry);
  // Must not block: a backend whose hold owns a session hands its clean-up to a backend thread.
  virtual ~HeldLock() = default;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

  const std::string& name() const noexcept { return name_; }
  LockMode mode() const noexcept { return mode_; }
  const std::string& owner_key() const noexcept { return owner_key_; }
  std::uint64_t fencing_token() const noexcept { return token_; }

  // The earlier of server_expiry() and client_expiry().
  Clock::time_point expires_at() const noexcept;
  // The backend's estimate of the server-side end, taken from before the request that set
  // it was sent. Backends set it on grant, renewal and probe.
  Clock::time_point server_expiry() const noexcept;
  void set_server_expiry(Clock::time_point t) noexcept;
  // The end of an explicit lease the client enforces; max() when there is none. Core only.
  Clock::time_point client_expiry() const noexcept;
  void set_client_expiry(Clock::time_point t) noexcept;

  // Fires the lost signal: idempotent, thread-safe, never throws. Backends call it when
  // they learn the lock is gone or in doubt (session expired, connection lost); the core
  // then gives the hold up and calls Backend::release once to make the server forget it.
  void mark_lost() noexcept;
  bool lost() const noexcept { return lost_.stop_requested(); }
  std::stop_token lost_token() const noexcept { return lost_.get_token(); }

 private:
  const std::string name_;
  const LockMode mode_;
  const std::string owner_key_;
  const std::uint64_t token_;
  std::atomic<Clock::rep> server_expiry_;
  std::atomic<Clock::rep> client_expiry_;
  std::stop_source lost_;
};

}  // namespace dlock::spi
