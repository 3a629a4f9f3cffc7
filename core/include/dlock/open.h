// Choosing a provider at run time by URI.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/provider.h"
#include "dlock/uri.h"

namespace dlock {

using ProviderFactory = std::function<std::shared_ptr<ILockProvider>(const Uri&)>;

// Opens a provider for `uri`, e.g. "mem://", "file:///var/lib/app/locks",
// "redis://127.0.0.1:6379/0". Throws Error(invalid_argument) for a malformed URI or an
// unknown scheme (the message names the schemes compiled in), and whatever the backend's
// factory throws (invalid_argument for bad parameters, unavailable when the server cannot
// be reached within its connect timeout, or when the process cannot start the provider's
// two watchdog threads). Thread-safe.
std::shared_ptr<ILockProvider> open(std::string_view uri);

// Registers `factory` for `scheme` (lower-case). Backends call it from a static registrar
// compiled into their library; link dlock::dlock to get every compiled-in backend.
// Throws Error(invalid_argument) if the scheme is already registered. Thread-safe.
void register_scheme(std::string scheme, ProviderFactory factory);

// The registered schemes, sorted.
std::vector<std::string> registered_schemes();

}  // namespace dlock
