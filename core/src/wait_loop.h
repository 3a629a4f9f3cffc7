// The one wait loop every backend shares: attempt through the backend's per-acquire object,
// then sleep until woken, the holder's TTL, the fallback poll or the deadline, whichever comes
// first, and attempt again.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "dlock/spi/backend.h"
#include "hold.h"

namespace dlock::detail {

// What one Acquisition acts under (spi::AttemptRequest::owner_key and waiter_id).
struct AcquireIds {
  std::string owner_key;
  std::string waiter_id;
};

// Returns the granted lock, or nullptr when `deadline` passed or `cancel` was requested.
// Error(unavailable) from an attempt is retried (with a fresh Acquisition, after a short
// backoff) while the deadline has not passed, and rethrown once it has; every other error
// propagates at once. Whatever the acquire left on the server is abandoned before returning
// or throwing (the Acquisition's destructor).
// Each Acquisition gets its own ids from `next_ids` (the request's are ignored): a backend
// may undo a given-up Acquisition late (a reply lost to a stalled server), and that undo,
// addressed to its ids, must never reach the grant of a later Acquisition of this call.
std::shared_ptr<spi::HeldLock> wait_for_lock(spi::Backend& backend, spi::AttemptRequest request,
                                             const std::function<AcquireIds()>& next_ids,
                                             Clock::time_point deadline, std::stop_token cancel);

}  // namespace dlock::detail
