#include "range_lock.h"

#include <fcntl.h>
#include <pthread.h>

#include <cerrno>

#include "errors.h"

namespace dlock::file {
namespace {

struct flock make_flock(Range range, short type, int count = 1) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(range);
  fl.l_len = count;
  fl.l_pid = 0;  // required by F_OFD_*
  return fl;
}

}  // namespace

bool try_lock_range(int fd, Range range, RangeMode mode, const char* path) {
  return try_lock_ranges(fd, range, 1, mode, path);
}

bool try_lock_ranges(int fd, Range first, int count, RangeMode mode, const char* path) {
  struct flock fl = make_flock(first, mode == RangeMode::shared ? F_RDLCK : F_WRLCK, count);
  for (;;) {
    if (::fcntl(fd, F_OFD_SETLK, &fl) == 0) return true;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES) return false;
    throw sys_error("fcntl(F_OFD_SETLK)", path, errno);
  }
}

int wait_lock_ranges(int fd, Range first, int count, RangeMode mode) {
  struct flock fl = make_flock(first, mode == RangeMode::shared ? F_RDLCK : F_WRLCK, count);
  int unused = 0;
  for (;;) {
    ::pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &unused);
    int rc = ::fcntl(fd, F_OFD_SETLKW, &fl);  // glibc: a cancellation point for F_OFD_SETLKW
    int err = errno;
    ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &unused);
    if (rc == 0) return 0;
    if (err != EINTR) return err;
  }
}

void unlock_range(int fd, Range range) noexcept { unlock_ranges(fd, range, 1); }

void unlock_ranges(int fd, Range first, int count) noexcept {
  struct flock fl = make_flock(first, F_UNLCK, count);
  while (::fcntl(fd, F_OFD_SETLK, &fl) != 0 && errno == EINTR) {
  }
}

}  // namespace dlock::file
