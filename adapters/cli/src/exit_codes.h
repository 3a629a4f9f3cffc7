// The exit codes of `dlock run`, chosen from sysexits(3) and the shell's conventions so that
// scripts can tell "the lock was busy" from "the command failed".
#pragma once

#include "dlock/error.h"

namespace dlock::cli {

// Otherwise dlock exits with the command's own status, or 128+N if a signal N killed it.
inline constexpr int kExitUsage = 64;        // EX_USAGE: bad option, duration, URI or name
inline constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: the lock service cannot be reached
inline constexpr int kExitLockLost = 70;     // the lock was lost while the command ran (it was stopped)
inline constexpr int kExitInternal = 71;     // EX_OSERR: a system call or dlock itself failed
inline constexpr int kExitNotAcquired = 75;  // EX_TEMPFAIL: not acquired within --wait
inline constexpr int kExitCannotRun = 126;   // the command exists but could not be executed
inline constexpr int kExitNotFound = 127;    // the command was not found

// The exit code for a dlock::Error that ended `dlock run` before the command started.
int exit_code_for(ErrorCode code) noexcept;

}  // namespace dlock::cli
