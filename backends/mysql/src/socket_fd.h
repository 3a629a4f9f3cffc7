// Finding the fd of a Connector/C++ connection's TCP socket (the library hides it), so the
// hang-up monitor can watch it (shared/SESSION_BACKENDS.md §1.1). Never reads from a socket.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace dlock::mysql {

// The fd of this process's TCP socket whose local port is `local_port` and remote port
// `remote_port`, or -1. For direct connections: the server reports our port.
int find_socket_fd(std::uint16_t local_port, std::uint16_t remote_port);

// A socket of this process connected to `remote_port`: fd and inode (an fd number may be
// reused for another socket; the pair may not).
struct SocketId {
  int fd;
  ino_t inode;
  bool operator==(const SocketId&) const = default;
};
std::vector<SocketId> sockets_to(std::uint16_t remote_port);

// Behind a proxy that rewrites ports the server reports the proxy's port, so the socket is
// told apart by arriving: the one socket to `remote_port` in `after` that is not in `before`
// and not claimed by another live connection; -1 when there is none or more than one (a
// concurrent connect): then only probes notice a dead session. The fd found is claimed.
int new_socket_fd(const std::vector<SocketId>& before, const std::vector<SocketId>& after);

// A live connection's fd, so concurrent discoveries do not take it. release before closing.
void claim_socket_fd(int fd);
void release_socket_fd(int fd) noexcept;

}  // namespace dlock::mysql
