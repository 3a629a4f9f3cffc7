#include "exit_codes.h"

namespace dlock::cli {

int exit_code_for(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument:
    case ErrorCode::unsupported:     // e.g. --shared on a backend without read-write locks
    case ErrorCode::would_deadlock:
      return kExitUsage;
    case ErrorCode::unavailable: return kExitUnavailable;
    case ErrorCode::timed_out: return kExitNotAcquired;
    case ErrorCode::lock_lost:
    case ErrorCode::not_held:
      return kExitLockLost;
    case ErrorCode::cancelled:
    case ErrorCode::internal:
      break;
  }
  return kExitInternal;
}

}  // namespace dlock::cli
