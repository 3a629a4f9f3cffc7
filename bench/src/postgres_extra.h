// postgres:// extras: the native blocking hand-off floor, the (b) ratio against it, and the
// peers tooz and psycopg2 (through /usr/bin/python3; a missing one is a note).
#pragma once

#include "args.h"
#include "dlock/uri.h"
#include "report.h"

namespace dlock_bench {

void run_postgres_extra(const dlock::Uri& uri, const Settings& settings, Report& report);

}  // namespace dlock_bench
