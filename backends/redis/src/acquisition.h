// One acquire call on the redis backend: its attempts, its wake-up registration and queue
// entry, and the clean-up when it gives up (see spi::Acquisition).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "dlock/spi/backend.h"
#include "subscriber.h"

namespace dlock::redis {

class RedisBackend;

// Not thread-safe (the core calls it from one thread at a time); `wake` is called from the
// subscriber's thread.
class RedisAcquisition final : public spi::Acquisition {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: backend and request outlive this object.
  RedisAcquisition(RedisBackend& backend, const spi::AttemptRequest& request,
                   std::function<void()> wake);
  // Unregisters; if the acquire may have queued or been handed the lock and was not
  // granted, runs lua/abandon.lua (removes the queue entry, gives back a grant not picked
  // up). Never throws; bounded by the command timeout (twice on a broken connection).
  ~RedisAcquisition() override;

  // One EVALSHA of lua/acquire.lua. On the first Busy of a caller that waits: subscribes to the lock's channel, then tries
  // once more, so a release between the two attempts cannot be missed.
  // Throws Error(unavailable) on transport failure or a transient server refusal.
  spi::Attempt attempt() override;
  // The registration's poll (fair_heartbeat/3 while subscribed, 25 ms while the subscriber
  // is down); 25 ms before any registration.
  std::chrono::milliseconds fallback_poll() const noexcept override;

 private:
  spi::Attempt attempt_once();
  void register_for_wakeups();

  RedisBackend& backend_;
  const spi::AttemptRequest& req_;
  const std::function<void()> wake_;
  std::unique_ptr<Subscriber::Registration> reg_;
  bool tried_ = false;    // an attempt was sent: a queue entry or a grant may exist
  bool granted_ = false;  // an attempt returned a grant: the core owns it now
};

}  // namespace dlock::redis
