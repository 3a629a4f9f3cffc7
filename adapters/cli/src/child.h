// Starting the command and supervising it while the lock is held.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "signals.h"

namespace dlock::cli {

// Starts `argv` (argv[0] looked up in $PATH) with environment `env` ("NAME=VALUE" entries)
// and signal mask `mask`; stdin/stdout/stderr are inherited.
// Returns the child's pid, or -errno if it could not be started (ENOENT: not found).
// REQUIRES: argv is not empty.
pid_t spawn_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const sigset_t& mask);

// How the supervised command ended.
struct ChildExit {
  int status = 0;     // its exit status, or 128+N if signal N killed it
  bool lost = false;  // the lock was lost while it ran (it was sent SIGTERM/SIGKILL)
};

// Blocks until child `pid` has exited, then returns how. Meanwhile forwards every signal
// read from `signals` except SIGCHLD to the child, and once `lost` becomes readable calls
// `on_lost` (if set; e.g. to print it) and sends the child SIGTERM, then SIGKILL if it is
// still alive `grace` later. Sleeps in poll(); no busy waiting. Never throws.
ChildExit supervise(pid_t pid, SignalFd& signals, const EventFd& lost, std::chrono::milliseconds grace,
                    const std::function<void()>& on_lost);

}  // namespace dlock::cli
