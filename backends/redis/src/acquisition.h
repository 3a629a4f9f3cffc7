// One acquire call on the redis backend: its attempts, its queue entry and blocking wait for
// a grant, and the clean-up when it gives up (see spi::Acquisition).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "dlock/spi/backend.h"
#include "grant_wait.h"

namespace dlock::redis {

class RedisBackend;

// Not thread-safe (the core calls it from one thread at a time). The grant arrives on
// wait_fd(), read by the waiting thread itself: `wake` is not needed.
class RedisAcquisition final : public spi::Acquisition {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: backend and request outlive this object.
  RedisAcquisition(RedisBackend& backend, const spi::AttemptRequest& request,
                   std::function<void()> wake);
  // Stops the blocking wait; if the acquire may have queued or been handed the lock and was
  // not granted, runs lua/abandon.lua (removes the queue entry and the grant list, gives
  // back a grant not picked up or picked up too late). Never throws; bounded by the command
  // timeout (twice if the server closed the connection). After an attempt whose reply was
  // lost (its request may run later), or an abandon that failed, the abandon is left to the
  // backend's clean-up thread (RedisBackend::abandon) and this returns at once.
  ~RedisAcquisition() override;

  // A grant the blocking wait delivered (no round trip), else one EVALSHA of
  // lua/acquire.lua. After the first Busy of a caller that waits: BLPOP on its grant list
  // (grant_wait.h). A grant pushed before the BLPOP stays in the list, so nothing is missed.
  // Throws Error(unavailable) on transport failure or a transient server refusal.
  spi::Attempt attempt() override;
  // fair_heartbeat/3 while the blocking wait is on (each attempt refreshes the queue entry);
  // 25 ms without one (it could not be started, or failed).
  std::chrono::milliseconds fallback_poll() const noexcept override;
  // The blocking wait's connection while it is on.
  int wait_fd() const noexcept override;

 private:
  spi::Attempt attempt_once();
  // Starts the blocking wait (grant_wait.h); `with_attempt`: preceded by the silent first
  // attempt (RedisBackend::append_silent_acquire). Returns null when the wait is on, else
  // why it could not start (no connection could be had).
  std::exception_ptr start_wait(bool with_attempt) noexcept;
  void stop_wait() noexcept;

  RedisBackend& backend_;
  const spi::AttemptRequest& req_;
  std::unique_ptr<GrantWait> wait_;
  bool tried_ = false;    // an attempt was sent: a queue entry or a grant may exist
  bool queued_ = false;   // an attempt answered Busy to a caller that waits
  bool granted_ = false;  // an attempt returned a grant: the core owns it now
  bool lost_ = false;     // an attempt's request may have reached the server, its reply lost
  // The silent first attempt was sent and nothing answered on its connection yet: it may
  // still reach the server after this acquisition's abandon (RedisBackend::abandon).
  bool silent_pending_ = false;
};

}  // namespace dlock::redis
