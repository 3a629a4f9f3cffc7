// Where `dlock run` finds its lock service when --uri is not given.
#pragma once

#include <optional>
#include <string>

namespace dlock::cli {

// The URI to use: `from_option` if given, else $DLOCK_URI if set and non-empty, else the
// embedded default: "file://" + a per-user directory, $XDG_RUNTIME_DIR/dlock when
// XDG_RUNTIME_DIR is an absolute path, else /tmp/dlock-$UID.
// The default directory is created with mode 0700 if missing, and refused if it is not a
// real directory owned by this user without group/other permissions (another user could
// otherwise pre-create it and hold our locks): throws Error(unavailable) saying why.
std::string resolve_uri(const std::optional<std::string>& from_option);

// The default lock directory (not created), as resolve_uri would choose it.
std::string default_lock_dir();

}  // namespace dlock::cli
