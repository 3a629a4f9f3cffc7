#include "dlock/adapters/with_lock.h"

#include "dlock/error.h"
#include "dlock/wait.h"

namespace dlock::detail {

Lease acquire_spec(ILockProvider& provider, const LockSpec& spec) {
  AcquireOptions options;
  options.lease = spec.lease;
  options.max_hold = spec.max_hold;
  options.owner = spec.owner;
  options.cancel = spec.cancel;
  return provider.acquire(spec.key, spec.mode, spec.wait, options);
}

void finish_spec(Lease& lease) {
  const std::string name = lease.name();  // before release(), which may empty the lease
  bool lost = lease.lost_token().stop_requested();
  bool released = false;
  try {
    released = lease.release();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unavailable) throw;
    return;  // could not tell; the lock ends by itself with its lease or session
  }
  if (lost || !released) {
    throw Error(ErrorCode::lock_lost, "lock '" + name + "' was lost while the guarded work ran");
  }
}

}  // namespace dlock::detail
