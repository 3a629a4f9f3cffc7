// Peer libraries measured next to dlock for a side-by-side line (optional: a peer that is
// not installed is noted, not an error).
#pragma once

#include "args.h"
#include "dlock/uri.h"
#include "report.h"

namespace dlock_bench {

// redis:// — redis-py's Lock (uncontended acquire + release) through /usr/bin/python3.
// Other schemes: nothing yet.
void run_peers(const dlock::Uri& uri, const Settings& settings, Report& report);

// mysql:// (floor_mysql.cpp): the GET_LOCK pair (a raw floor of the same run), then tooz
// and MySQLdb GET_LOCK peers.
void run_mysql_peers(const dlock::Uri& uri, const Settings& settings, Report& report);

// mysql:// (floor_mysql.cpp), section (b), after dlock's contended run: a native blocking
// GET_LOCK hand-off among settings.workers contenders, and dlock's hand-offs/s against it
// (target >= 0.6 x).
void run_mysql_handoff_floor(const dlock::Uri& uri, const Settings& settings, Report& report);

}  // namespace dlock_bench
