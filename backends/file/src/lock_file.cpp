#include "lock_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "dlock/error.h"
#include "errors.h"

namespace dlock::file {
namespace {

// O_NONBLOCK: a FIFO or device planted in the directory must not block the open.
constexpr int kFlags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;

void sync_dir(const std::string& dir) {
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid()) throw sys_error("open", dir, errno);
  while (::fsync(d.get()) != 0) {
    if (errno != EINTR) throw sys_error("fsync", dir, errno);
  }
}

}  // namespace

void ensure_directory(const std::string& dir) {
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      throw sys_error("mkdir", prefix, errno);
    }
  }
}

LockFd open_lock_file(const std::string& dir, const std::string& path, bool durable) {
  bool recreated = false;
  for (;;) {
    UniqueFd fd(::open(path.c_str(), kFlags));
    if (!fd.valid() && errno == ENOENT) {
      fd.reset(::open(path.c_str(), kFlags | O_CREAT | O_EXCL, 0600));
      if (!fd.valid() && errno == EEXIST) continue;  // another process created it first
      if (!fd.valid() && errno == ENOENT && !recreated) {  // the directory itself is gone
        ensure_directory(dir);
        recreated = true;
        continue;
      }
      if (fd.valid() && durable) sync_dir(dir);
    }
    if (!fd.valid()) {
      if (errno == EINTR) continue;
      throw sys_error("open", path, errno);  // ELOOP: someone planted a symlink
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw sys_error("fstat", path, errno);
    if (!S_ISREG(st.st_mode)) {
      throw Error(ErrorCode::invalid_argument, "file://: " + path + " is not a regular file");
    }
    return LockFd{std::move(fd), st.st_dev, st.st_ino};
  }
}

Identity identity(int fd, const std::string& path) noexcept {
  struct stat held {};
  struct stat named {};
  if (::fstat(fd, &held) != 0) return Identity::unknown;
  if (::fstatat(AT_FDCWD, path.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT || errno == ENOTDIR ? Identity::replaced : Identity::unknown;
  }
  bool same = held.st_dev == named.st_dev && held.st_ino == named.st_ino && held.st_nlink > 0;
  return same ? Identity::same : Identity::replaced;
}

Identity identity(const LockFd& file, const std::string& path) noexcept {
  struct stat named {};
  if (::fstatat(AT_FDCWD, path.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT || errno == ENOTDIR ? Identity::replaced : Identity::unknown;
  }
  // Our descriptor keeps the inode alive, so no other file can have its number meanwhile.
  return named.st_dev == file.dev && named.st_ino == file.ino ? Identity::same
                                                              : Identity::replaced;
}

}  // namespace dlock::file
