// For a backend's static registrar: puts its URI schemes into dlock::open's registry.
#pragma once

#include <initializer_list>

#include "dlock/open.h"

namespace dlock::spi {

// Registers `factory` for each of `schemes`. Call it from a static initializer
// (`const bool registered = spi::register_schemes({"x"}, open_x);`): it never throws, since
// an exception there would end the process before main(). A scheme that is registered
// already keeps its factory: that happens when one process holds two copies of a backend,
// e.g. two shared libraries that each link dlock statically (both copies then use the
// registry of the one loaded first). Returns true if this call registered every scheme.
bool register_schemes(std::initializer_list<const char*> schemes, const ProviderFactory& factory) noexcept;

}  // namespace dlock::spi
