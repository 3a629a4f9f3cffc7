#include "dlock/support/close_on_exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
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

// The same IPv4/IPv6 address and port (padding and IPv6 flow labels aside).
bool same_endpoint(const sockaddr_storage& a, const sockaddr* b, socklen_t b_length) noexcept {
  if (a.ss_family != b->sa_family) return false;
  if (a.ss_family == AF_INET && b_length >= sizeof(sockaddr_in)) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(b);
    return x.sin_port == y->sin_port && x.sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6 && b_length >= sizeof(sockaddr_in6)) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(b);
    return x.sin6_port == y->sin6_port && std::memcmp(&x.sin6_addr, &y->sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
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

void close_new_descriptors_on_exec(const std::vector<int>& before) noexcept {
  try {
    for (int fd : inheritable_descriptors()) {
      if (!std::binary_search(before.begin(), before.end(), fd)) set_close_on_exec(fd);
    }
  } catch (...) {  // std::bad_alloc: nothing marked, as without /proc
  }
}

void close_sockets_to_on_exec(const sockaddr* peer, socklen_t length) noexcept {
  if (peer == nullptr || length == 0) return;
  each_descriptor([&](int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || !inheritable(fd)) return;
    sockaddr_storage other{};
    socklen_t other_length = sizeof other;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&other), &other_length) != 0) return;
    if (same_endpoint(other, peer, length)) set_close_on_exec(fd);
  });
}

}  // namespace dlock::support
