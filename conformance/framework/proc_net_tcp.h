// This host's IPv4 TCP sockets as /proc/net/tcp lists them, for tests that look at a
// connection from outside: whether a side has closed it, what a server has not read yet.
#pragma once

namespace dlock::conformance {

// The state of the socket from `local_port` to `remote_port` (1 established, 4/5 FIN_WAIT1/2
// after a close or shutdown); 0 if there is none.
int tcp_state(int local_port, int remote_port);

// The bytes the socket from `local_port` to `remote_port` has received and its owner not read
// yet; -1 if there is no such socket.
long rx_queue(int local_port, int remote_port);

}  // namespace dlock::conformance
