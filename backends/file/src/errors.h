// Turning a failed system call into dlock::Error: the backend's one error-translation place.
#pragma once

#include <string_view>

#include "dlock/error.h"

namespace dlock::file {

// The error for system call `op` failing with `err` on `path`: unavailable for I/O,
// permission and resource failures (the lock directory cannot be used right now).
// The message reads "file://: <op> <path>: <strerror>". Never throws anything else.
[[nodiscard]] Error sys_error(std::string_view op, std::string_view path, int err);

}  // namespace dlock::file
