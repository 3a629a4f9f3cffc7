// One of two shared libraries that each link dlock statically (dlock::dlock: the core and
// every compiled-in backend), as two independent plugins of one program may. Loading both
// runs every backend's registrar twice, before main().
#include "dlock/dlock.h"

extern "C" int DLOCK_PLUGIN_FN() {
  auto provider = dlock::open("mem://two-copies");
  return provider->try_lock(DLOCK_PLUGIN_NAME) ? 1 : 0;
}
