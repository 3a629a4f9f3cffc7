#include "inherited_fds.h"

#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <cstdlib>

namespace dlock::cli {
namespace {

// The open descriptors (without the one listing them), or nothing if /proc cannot tell.
bool list_open(std::vector<int>& out) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;  // ".", ".."
    out.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return true;
}

}  // namespace

InheritedFds::InheritedFds() { known_ = list_open(fds_); }

void InheritedFds::close_others_on_exec() const noexcept {
  if (!known_) return;
  std::vector<int> open;
  try {
    if (!list_open(open)) return;
  } catch (...) {  // std::bad_alloc
    return;
  }
  for (int fd : open) {
    if (std::binary_search(fds_.begin(), fds_.end(), fd)) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

}  // namespace dlock::cli
