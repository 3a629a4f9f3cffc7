// Turning a Backend into an ILockProvider: what every backend's factory returns.
#pragma once

#include <memory>
#include <string>

#include "dlock/provider.h"
#include "dlock/spi/backend.h"

namespace dlock::spi {

// Wraps `backend` with the core's reentrancy, wait loop and watchdog.
// `redacted_uri` is what ILockProvider::uri() reports (no password!).
std::shared_ptr<ILockProvider> make_provider(std::shared_ptr<Backend> backend,
                                             std::string redacted_uri);

}  // namespace dlock::spi
