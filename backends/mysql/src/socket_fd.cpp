#include "socket_fd.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
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

// A socket's address and port; nullopt for anything but IPv4 and IPv6.
struct Endpoint {
  IpAddress address;
  std::uint16_t port = 0;
};

std::optional<Endpoint> endpoint_of(const sockaddr_storage& a) {
  Endpoint e;
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    e.address.family = AF_INET;
    std::memcpy(e.address.bytes.data(), &in.sin_addr, 4);
    e.port = ntohs(in.sin_port);
    return e;
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      e.address.family = AF_INET;
      std::memcpy(e.address.bytes.data(), in6.sin6_addr.s6_addr + 12, 4);
    } else {
      e.address.family = AF_INET6;
      std::memcpy(e.address.bytes.data(), in6.sin6_addr.s6_addr, 16);
    }
    e.port = ntohs(in6.sin6_port);
    return e;
  }
  return std::nullopt;
}

// Calls `f(fd, inode, local, peer)` for every connected TCP socket (SOCK_STREAM,
// IPPROTO_TCP, IPv4 or IPv6) of this process; stops when f returns true. UDP sockets with
// the same addresses, SCTP streams and unix sockets are never reported.
template <typename F>
void each_tcp_socket(F f) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = ::readdir(dir)) {
    int fd = 0;
    const char* end = e->d_name + std::strlen(e->d_name);
    if (std::from_chars(e->d_name, end, fd).ptr != end) continue;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int type = 0, protocol = 0;
    socklen_t tl = sizeof type, pl = sizeof protocol;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) continue;
    if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &pl) != 0 || protocol != IPPROTO_TCP) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, rl = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &rl) != 0) continue;
    const auto l = endpoint_of(local);
    const auto r = endpoint_of(peer);
    if (!l || !r) continue;
    if (f(fd, st.st_ino, *l, *r)) break;
  }
  ::closedir(dir);
}

bool is_remote(const Endpoint& peer, const std::vector<IpAddress>& addresses, std::uint16_t port) {
  return peer.port == port && std::find(addresses.begin(), addresses.end(), peer.address) != addresses.end();
}

std::mutex claimed_mu;
std::set<int>& claimed() {
  static std::set<int> fds;  // guarded by claimed_mu
  return fds;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  const std::string s(text);
  sockaddr_storage a{};
  if (::inet_pton(AF_INET, s.c_str(), &reinterpret_cast<sockaddr_in&>(a).sin_addr) == 1) {
    a.ss_family = AF_INET;
  } else if (::inet_pton(AF_INET6, s.c_str(), &reinterpret_cast<sockaddr_in6&>(a).sin6_addr) == 1) {
    a.ss_family = AF_INET6;
  } else {
    return std::nullopt;
  }
  return endpoint_of(a)->address;
}

std::vector<IpAddress> resolve_host(const std::string& host) {
  std::vector<IpAddress> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return out;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addr == nullptr || ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    sockaddr_storage a{};
    std::memcpy(&a, ai->ai_addr, ai->ai_addrlen);
    const auto e = endpoint_of(a);
    if (e && std::find(out.begin(), out.end(), e->address) == out.end()) out.push_back(e->address);
  }
  ::freeaddrinfo(list);
  return out;
}

int find_socket_fd(const SocketEnds& ends, bool* ambiguous) {
  if (ambiguous != nullptr) *ambiguous = false;
  std::lock_guard lock(claimed_mu);  // the match and the claim are one step
  int found = -1;
  int matches = 0;
  each_tcp_socket([&](int fd, ino_t, const Endpoint& local, const Endpoint& peer) {
    if (local.port != ends.local_port) return false;
    if (ends.local_address && local.address != *ends.local_address) return false;
    if (!is_remote(peer, ends.remote_addresses, ends.remote_port)) return false;
    ++matches;
    found = fd;
    return false;  // every socket is looked at: two matches are no match
  });
  if (matches == 0) return -1;
  if (matches > 1 || claimed().count(found) != 0) {
    if (ambiguous != nullptr) *ambiguous = true;
    return -1;
  }
  claimed().insert(found);
  return found;
}

std::vector<SocketId> sockets_to(const std::vector<IpAddress>& remote_addresses, std::uint16_t remote_port) {
  std::vector<SocketId> out;
  each_tcp_socket([&](int fd, ino_t inode, const Endpoint&, const Endpoint& peer) {
    if (is_remote(peer, remote_addresses, remote_port)) out.push_back({fd, inode});
    return false;
  });
  return out;
}

int new_socket_fd(const std::vector<SocketId>& before, const std::vector<SocketId>& after) {
  std::lock_guard lock(claimed_mu);
  int found = -1;
  // A socket whose inode was there before is no arrival even under a new number: a
  // duplicate (read_bound.h takes one per deadline) of another connection's socket.
  const auto was_there = [&](const SocketId& s) {
    const auto same = [&](const SocketId& b) { return b.inode == s.inode; };
    return std::any_of(before.begin(), before.end(), same);
  };
  for (const auto& s : after) {
    if (was_there(s) || claimed().count(s.fd) != 0) continue;
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
