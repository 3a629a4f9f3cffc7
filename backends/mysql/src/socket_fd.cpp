#include "socket_fd.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <set>

namespace dlock::mysql {
namespace {

std::uint16_t port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return 0;
}

// Calls `f(fd, inode, local_port, remote_port)` for every TCP/IP socket fd of this process.
template <typename F>
void each_socket(F f) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = ::readdir(dir)) {
    int fd = 0;
    const char* end = e->d_name + std::strlen(e->d_name);
    if (std::from_chars(e->d_name, end, fd).ptr != end) continue;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    if (f(fd, st.st_ino, port_of(local), port_of(peer))) break;
  }
  ::closedir(dir);
}

std::mutex claimed_mu;
std::set<int>& claimed() {
  static std::set<int> fds;  // guarded by claimed_mu
  return fds;
}

}  // namespace

int find_socket_fd(std::uint16_t local_port, std::uint16_t remote_port) {
  int found = -1;
  each_socket([&](int fd, ino_t, std::uint16_t local, std::uint16_t remote) {
    if (local != local_port || remote != remote_port) return false;
    found = fd;
    return true;
  });
  return found;
}

std::vector<SocketId> sockets_to(std::uint16_t remote_port) {
  std::vector<SocketId> out;
  each_socket([&](int fd, ino_t inode, std::uint16_t, std::uint16_t remote) {
    if (remote == remote_port) out.push_back({fd, inode});
    return false;
  });
  return out;
}

int new_socket_fd(const std::vector<SocketId>& before, const std::vector<SocketId>& after) {
  std::lock_guard lock(claimed_mu);
  int found = -1;
  for (const auto& s : after) {
    if (std::find(before.begin(), before.end(), s) != before.end() || claimed().count(s.fd) != 0) continue;
    if (found >= 0) return -1;  // two candidates: not ours to guess
    found = s.fd;
  }
  if (found >= 0) claimed().insert(found);
  return found;
}

void claim_socket_fd(int fd) {
  std::lock_guard lock(claimed_mu);
  claimed().insert(fd);
}

void release_socket_fd(int fd) noexcept {
  std::lock_guard lock(claimed_mu);
  claimed().erase(fd);
}

}  // namespace dlock::mysql
