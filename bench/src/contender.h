// One contender of (b): loops acquire(forever) -> release on one name, stamping the shared
// region, until the region's stop flag is set.
#pragma once

#include <stop_token>
#include <string>

#include "args.h"
#include "dlock/provider.h"
#include "shared_region.h"

namespace dlock_bench {

// Marks slot `index` ready, waits for the go flag, then contends until the stop flag (or
// `cancel`, which also ends a waiting acquire). With `own_cpu`, stores this process's CPU
// time during the window in the slot. Marks the slot done, or failed with the error's
// message (it never throws).
void contend(dlock::ILockProvider& provider, const SharedRegion& region, int index, const std::string& name,
             std::stop_token cancel, bool own_cpu) noexcept;

// Entry point of a worker process (`dlock-bench --worker-contended …`): opens the URI given
// in the environment and contends. Returns the process exit code.
int worker_main(const WorkerArgs& args);

}  // namespace dlock_bench
