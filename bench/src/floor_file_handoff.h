// (b) for file://: the kernel's hand-off floor (processes handing over a blocking
// F_OFD_SETLKW lock, no dlock), and dlock's contended hand-off as a ratio of it.
#pragma once

#include "args.h"
#include "dlock/uri.h"
#include "report.h"

namespace dlock_bench {

struct HandoffFloor {
  double handoffs_per_s = 0;
  double cpu_s_per_1000 = 0;  // all workers' CPU (user+sys, whole lifetime) per 1,000 hand-offs
  double acquisitions_per_s = 0;
  double cpu_s_per_1000_acquisitions = 0;
};

// settings.workers forked processes hand over one F_OFD_SETLKW lock on a file in the URI's
// directory for settings.contended; adds the floor's row. Throws std::runtime_error.
HandoffFloor run_file_handoff_floor(const dlock::Uri& uri, const Settings& settings, Report& report);

// Adds a row comparing (b)'s dlock figures already in `report` with `floor`.
// Throws std::runtime_error when (b) left no figures.
void add_handoff_floor_ratios(const HandoffFloor& floor, Report& report);

}  // namespace dlock_bench
