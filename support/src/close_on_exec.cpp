#include "dlock/support/close_on_exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace dlock::support {
namespace {

// Calls f(fd) for every descriptor open now, stdio included (not the listing's own).
template <typename F>
void each_descriptor(F f) {
  DIR* dir = ::opendir("/proc/self/fd");  // glibc opens it close-on-exec
  if (dir == nullptr) return;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    int fd = -1;
    const char* end = e->d_name + std::strlen(e->d_name);
    if (std::from_chars(e->d_name, end, fd).ptr != end || fd == own) continue;  // ".", ".."
    f(fd);
  }
  ::closedir(dir);
}

bool inheritable(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFD);
  return flags >= 0 && (flags & FD_CLOEXEC) == 0;
}

}  // namespace

bool set_close_on_exec(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0) return false;
  return (flags & FD_CLOEXEC) != 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0;
}

std::vector<int> inheritable_descriptors() {
  std::vector<int> fds;
  each_descriptor([&](int fd) {
    if (inheritable(fd)) fds.push_back(fd);
  });
  std::sort(fds.begin(), fds.end());
  return fds;
}

std::vector<int> open_descriptors() {
  std::vector<int> fds;
  each_descriptor([&](int fd) { fds.push_back(fd); });
  std::sort(fds.begin(), fds.end());
  return fds;
}

void close_new_descriptors_on_exec(const std::vector<int>& before) noexcept {
  try {
    for (int fd : inheritable_descriptors()) {
      if (!std::binary_search(before.begin(), before.end(), fd)) set_close_on_exec(fd);
    }
  } catch (...) {  // std::bad_alloc: nothing marked, as without /proc
  }
}

}  // namespace dlock::support
