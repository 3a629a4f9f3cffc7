// mem:// — locks inside one process, with every capability (reentrant, read-write, fair,
// fencing, leases on the steady clock). All mem:// providers of a process that name the same
// space (mem://SPACE, default: the empty space) share one lock table, as clients of one
// server would: two providers exclude each other. It is what the core's unit tests run on.
//
// URI: mem://[SPACE][?lease=DURATION]
//   lease  default lease renewed by the watchdog (default 30s); short values make tests fast.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::mem {

// Destroys every hold of `name` in `space` from outside, as deleting a server's key would.
// For tests: holders find out at their next renewal (their lost signal fires) and their
// release reports "not held". Thread-safe.
void break_lock(std::string_view space, std::string_view name);

// What `space` holds, one line per item: holders whose lease has not run out, queued or
// preferred waiters, registered wake-ups, entries of names nobody holds or awaits. For
// tests: once every lock is released and no acquire is running, it must be empty.
// Thread-safe.
std::vector<std::string> residue(std::string_view space);

}  // namespace dlock::mem
