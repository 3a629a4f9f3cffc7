// The four measurements of a run. Each adds its rows to the report; a failure inside one is
// reported by the caller as that section's error, and the run goes on with the next.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "args.h"
#include "dlock/provider.h"
#include "dlock/uri.h"
#include "floor.h"
#include "report.h"

namespace dlock_bench {

// A lock name no other run uses: "dlock-bench/<pid>/<purpose>".
std::string bench_name(const std::string& purpose);

// (a) the floor next to dlock's uncontended try_lock + release of one name, interleaved.
// On redis, also the requests per iteration (MONITOR, untimed). Returns the floor's PING
// p50 in µs, if the floor has one.
std::optional<double> run_uncontended(const dlock::Uri& uri, dlock::ILockProvider& provider, const Floor& floor,
                                      const Settings& settings, Report& report);

// (b) settings.workers contenders on one name for settings.contended: handoff latency,
// handoffs/s, CPU per 1,000 handoffs, fairness. Processes (the bench binary re-executed in
// worker mode) for every backend but mem://, which is process-local and gets threads.
// `ping_p50_us` is the floor's one round trip, if any, for the target ratio.
void run_contended(const std::string& uri, std::shared_ptr<dlock::ILockProvider> provider,
                   std::optional<double> ping_p50_us, const Settings& settings, Report& report);

// (c) re-acquire + release by the owner that already holds the name.
void run_reentry(dlock::ILockProvider& provider, const Settings& settings, Report& report);

// (d) settings.leases leases in watchdog mode: round trips and CPU per renewal tick.
void run_watchdog(const std::string& uri, const Settings& settings, Report& report);

}  // namespace dlock_bench
