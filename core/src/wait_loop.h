// The one wait loop every backend shares: attempt through the backend's per-acquire object,
// then sleep until woken, the holder's TTL, the fallback poll or the deadline, whichever comes
// first, and attempt again.
#pragma once

#include <memory>
#include <stop_token>

#include "dlock/spi/backend.h"
#include "hold.h"

namespace dlock::detail {

// Returns the granted lock, or nullptr when `deadline` passed or `cancel` was requested.
// Error(unavailable) from an attempt is retried (with a fresh Acquisition, after a short
// backoff) while the deadline has not passed, and rethrown once it has; every other error
// propagates at once. Whatever the acquire left on the server is abandoned before returning
// or throwing (the Acquisition's destructor).
std::shared_ptr<spi::HeldLock> wait_for_lock(spi::Backend& backend, spi::AttemptRequest request,
                                             Clock::time_point deadline, std::stop_token cancel);

}  // namespace dlock::detail
