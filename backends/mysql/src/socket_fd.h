// Finding the fd of a Connector/C++ connection's TCP socket (the library hides it), so the
// hang-up monitor can watch it (shared/SESSION_BACKENDS.md §1.1). Never reads from a socket.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::mysql {

// An IPv4 or IPv6 address; an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address.
struct IpAddress {
  int family = 0;  // AF_INET or AF_INET6
  std::array<unsigned char, 16> bytes{};
  bool operator==(const IpAddress&) const = default;

  // A numeric address, IPv6 with or without brackets; nullopt for anything else (a name).
  static std::optional<IpAddress> parse(std::string_view text);
};

// The addresses `host` (a name or a numeric address) resolves to for TCP; empty when it
// does not resolve.
std::vector<IpAddress> resolve_host(const std::string& host);

// What a connection knows of its socket's two ends: the address and port the server sees it
// from (the address is unknown when the server reports a host name), and the server's port
// and addresses (the host it was given, resolved).
struct SocketEnds {
  std::optional<IpAddress> local_address;
  std::uint16_t local_port = 0;
  std::vector<IpAddress> remote_addresses;
  std::uint16_t remote_port = 0;
};

// The fd of this process's TCP socket (SOCK_STREAM, IPPROTO_TCP) with these ends, claimed
// for the caller. -1 when no socket has them, and also when more than one has them or the
// one that has them is claimed by another connection: then `*ambiguous` is set and only
// probes notice a dead session. A wrong fd is never returned: the fd is watched for
// hang-up, shut down at deadlines and given keepalive options.
int find_socket_fd(const SocketEnds& ends, bool* ambiguous = nullptr);

// A socket of this process connected to a server: fd and inode (an fd number may be
// reused for another socket; the pair may not).
struct SocketId {
  int fd;
  ino_t inode;
  bool operator==(const SocketId&) const = default;
};
// This process's TCP sockets connected to `remote_port` at one of `remote_addresses`.
std::vector<SocketId> sockets_to(const std::vector<IpAddress>& remote_addresses, std::uint16_t remote_port);

// Behind a proxy that rewrites ports the server reports the proxy's port, so the socket is
// told apart by arriving: the one socket in `after` whose inode is not in `before` (a new
// number for an old socket is a duplicate, no arrival) and not claimed by another live
// connection; -1 when there is none or more than one (a concurrent
// connect): then only probes notice a dead session. The fd found is claimed.
int new_socket_fd(const std::vector<SocketId>& before, const std::vector<SocketId>& after);

// A live connection's fd, so concurrent discoveries do not take it. release before closing.
void claim_socket_fd(int fd);
void release_socket_fd(int fd) noexcept;

}  // namespace dlock::mysql
