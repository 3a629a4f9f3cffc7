#include "dlock/provider.h"

#include "dlock/error.h"

namespace dlock {

Lease ILockProvider::acquire(std::string_view name, LockMode mode, Wait wait,
                             const AcquireOptions& options) {
  auto lease = try_acquire(name, mode, wait, options);
  if (lease) return std::move(*lease);
  if (options.cancel.stop_requested()) {
    throw Error(ErrorCode::cancelled, "acquire of '" + std::string(name) + "' was cancelled");
  }
  throw Error(ErrorCode::timed_out, "lock '" + std::string(name) + "' not acquired within the wait");
}

}  // namespace dlock
