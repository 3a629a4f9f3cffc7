// Opening lock files and checking that a descriptor still is the file its path names.
#pragma once

#include <sys/types.h>

#include <string>

#include "dlock/support/unique_fd.h"

namespace dlock::file {

using support::UniqueFd;

// mkdir -p `dir`, mode 0700 for every directory it creates. Throws Error(unavailable).
void ensure_directory(const std::string& dir);

// An open lock file and the identity (device, inode) it had when opened, so that checking
// whether its path still names it costs one stat of the path. The inode number cannot be
// reused while the descriptor keeps the inode alive.
struct LockFd {
  UniqueFd fd;
  dev_t dev = 0;
  ino_t ino = 0;

  bool valid() const noexcept { return fd.valid(); }
  int get() const noexcept { return fd.get(); }
};

// Opens the lock file `path` (in `dir`) read-write, creating it (mode 0600) if missing, and
// `dir` too if it disappeared (a tmp cleaner, an operator). Never follows
// a symlink at the last component; refuses anything but a regular file. With `durable`, a
// newly created file's directory entry is fsync()ed so the file (and its fencing counter)
// survives a power loss. Throws Error(unavailable) on failure.
LockFd open_lock_file(const std::string& dir, const std::string& path, bool durable);

enum class Identity {
  same,      // `path` names the file open on the descriptor
  replaced,  // `path` is gone or names another file: locks on the descriptor guard nothing
  unknown,   // could not tell (stat failed for another reason)
};

// Whether `fd` is still the file `path` names. Never throws.
Identity identity(int fd, const std::string& path) noexcept;
// The same for a LockFd, from its recorded identity: one stat of `path`. Never throws.
Identity identity(const LockFd& file, const std::string& path) noexcept;

}  // namespace dlock::file
