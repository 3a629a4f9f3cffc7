#include "range_lock.h"

#include <fcntl.h>

#include <cerrno>

#include "sys_error.h"

namespace dlock::file {
namespace {

struct flock make_flock(Range range, short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(range);
  fl.l_len = 1;
  fl.l_pid = 0;  // required by F_OFD_*
  return fl;
}

}  // namespace

bool try_lock_range(int fd, Range range, RangeMode mode, const char* path) {
  struct flock fl = make_flock(range, mode == RangeMode::shared ? F_RDLCK : F_WRLCK);
  for (;;) {
    if (::fcntl(fd, F_OFD_SETLK, &fl) == 0) return true;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES) return false;
    throw sys_error("fcntl(F_OFD_SETLK)", path, errno);
  }
}

void unlock_range(int fd, Range range) noexcept {
  struct flock fl = make_flock(range, F_UNLCK);
  while (::fcntl(fd, F_OFD_SETLK, &fl) != 0 && errno == EINTR) {
  }
}

}  // namespace dlock::file
