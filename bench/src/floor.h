// The floor: what the lock service costs without dlock, measured with the raw client in the
// same run. dlock's figures are reported as ratios against it.
#pragma once

#include <optional>
#include <string>

#include "args.h"
#include "dlock/uri.h"
#include "stats.h"

namespace dlock_bench {

struct Floor {
  std::string ping_label;       // e.g. "raw hiredis PING (1 RT)"
  std::optional<Samples> ping;  // one round trip; empty for backends without a wire
  std::string lock_label;       // e.g. "raw hiredis SET NX PX + EVALSHA release (2 RT)"
  std::optional<Samples> lock;  // the cheapest correct acquire+release by hand
  bool wire = false;            // a network floor: the "dlock p50 <= 1.10 x floor" target applies
};

// Measures the floor of `uri`'s backend: redis (hiredis), file (open+flock+close),
// mem (a mutex-guarded map). Unknown schemes get an empty Floor. Throws std::exception when
// the server cannot be reached.
Floor measure_floor(const dlock::Uri& uri, const Settings& settings);

Floor measure_redis_floor(const dlock::Uri& uri, const Settings& settings);
Floor measure_file_floor(const dlock::Uri& uri, const Settings& settings);
Floor measure_mem_floor(const Settings& settings);

}  // namespace dlock_bench
