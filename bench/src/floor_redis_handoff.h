// (b) for redis://: the server's native hand-off floors between the same number of processes
// as dlock's contenders, measured in the same run, and dlock's hand-off beside them.
#pragma once

#include <optional>

#include "args.h"
#include "dlock/uri.h"
#include "report.h"

namespace dlock_bench {

// What one floor measured (figures counted as contender.cpp counts dlock's).
struct RedisHandoffFloor {
  int workers = 0;
  double handoffs_per_s = 0;
  double acquisitions_per_s = 0;
  std::optional<double> p50_us;           // release -> another process holds
  double cpu_s_per_1000_handoffs = 0;     // all workers, user+sys, whole lifetime
  double commands_per_acquisition = 0;    // server-wide, INFO of the reading excluded
  double server_cpu_us_per_handoff = 0;   // the server's main thread, user+sys
};

enum class RedisFloorKind {
  blpop,    // a FIFO token queue: BLPOP takes the token, LPUSH hands it to the longest waiter
  spin,     // SET NX PX until it answers OK, compare-and-delete release (for reference)
};

// settings.workers forked processes (raw hiredis, no dlock) hand over one lock of `kind` for
// settings.contended; adds the floor's row. Throws std::runtime_error.
RedisHandoffFloor run_redis_handoff_floor(const dlock::Uri& uri, const Settings& settings, RedisFloorKind kind,
                                          Report& report);

// Adds a row that sets dlock's (b) figures for `floor.workers` processes (already in `report`)
// beside the BLPOP floor: hand-offs/s ratio, p50, commands per acquisition, CPU per 1,000.
// Throws std::runtime_error when (b) left no figures for that many processes.
void add_redis_handoff_ratios(const RedisHandoffFloor& floor, Report& report);

}  // namespace dlock_bench
