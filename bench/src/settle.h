// Before measuring: wait for the provider's first grant, so a backend's start-up pause is
// not timed (redis:// grants nothing for restart_grace on a dataset without its data-loss
// marker: a fresh server or prefix, or one that lost its data).
#pragma once

#include "dlock/provider.h"

namespace dlock_bench {

// Takes and releases one lock, waiting up to twice the default lease. Says on stderr how
// long it waited when that was noticeable. Throws what the provider throws (timed_out
// included).
void settle(dlock::ILockProvider& provider);

}  // namespace dlock_bench
