// `dlock run`: acquire, run the command under the lock, release.
#pragma once

#include "run_args.h"

namespace dlock::cli {

// Acquires args.name, runs args.command while holding it, releases it after the command
// exited, and returns dlock's exit status (see exit_codes.h). Errors are printed to stderr
// as one line each, passwords redacted. Never throws.
// REQUIRES: called from the main thread before any other thread was started (signals are
// blocked here and must stay blocked in every thread dlock starts).
int run_locked(const RunArgs& args);

}  // namespace dlock::cli
