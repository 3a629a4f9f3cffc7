// The one wait loop every backend shares: attempt, register for push wake-ups, attempt
// again (so a release in between is never missed), then sleep until woken, the holder's TTL,
// the fallback poll or the deadline, whichever comes first.
#pragma once

#include <memory>
#include <stop_token>

#include "dlock/spi/backend.h"
#include "hold.h"

namespace dlock::detail {

// Returns the granted lock, or nullptr when `deadline` passed or `cancel` was requested
// (after backend.abandon(request)). Propagates the backend's errors (after abandon).
std::shared_ptr<spi::HeldLock> wait_for_lock(spi::Backend& backend, spi::AttemptRequest request,
                                             Clock::time_point deadline, std::stop_token cancel);

}  // namespace dlock::detail
