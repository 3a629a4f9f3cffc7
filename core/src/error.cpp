#include "dlock/error.h"

namespace dlock {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::lock_lost: return "lock_lost";
    case ErrorCode::not_held: return "not_held";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::would_deadlock: return "would_deadlock";
    case ErrorCode::timed_out: return "timed_out";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::internal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string(to_string(code)) + ": " + message), code_(code), message_(message) {}

}  // namespace dlock
