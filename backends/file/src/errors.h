// Turning a failed system call into dlock::Error: the backend's one error-translation place.
#pragma once

#include <string_view>

#include "dlock/error.h"

namespace dlock::file {

// The error for system call `op` failing with `err` on `path`: invalid_argument when no
// retry can pass (a symlink or a directory at the path, no permission, a read-only file
// system, a path too long: the directory must be fixed), unavailable for I/O and resource
// failures that may pass (a full disk, out of descriptors).
// The message reads "file://: <op> <path>: <strerror>". Never throws anything else.
[[nodiscard]] Error sys_error(std::string_view op, std::string_view path, int err);

}  // namespace dlock::file
