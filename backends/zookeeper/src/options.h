// The zookeeper backend's settings, read from its URI (documented in
// backends/zookeeper/README.md).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "dlock/uri.h"

namespace dlock::zookeeper {

struct ZkOptions {
  // The C client's connect string: "h1:p1,h2:p2,::1:p3" (no chroot in it; IPv6 literals
  // without brackets: the client splits at the last ':').
  std::string hosts;
  std::string user;   // digest user; empty: no credentials (nodes get OPEN_ACL_UNSAFE)
  std::optional<std::string> password;
  // An existing node every lock node lives under ("" = the tree's root). Checked at open:
  // a chroot that does not exist is invalid_argument (we never create it, so a typo cannot
  // silently create a second lock tree).
  std::string chroot;
  std::string prefix = "dlock";  // one node under the chroot, created at open
  std::chrono::milliseconds session_timeout{10000};  // requested S; the server negotiates
  std::chrono::milliseconds connect_timeout{5000};   // bound on reaching CONNECTED
  std::chrono::milliseconds command_timeout{2000};   // bound on each awaited reply
  std::string where;  // "zookeeper h1:p1,[::1]:p3": for messages, never a password

  // chroot + "/" + prefix: the parent of every lock's container node.
  std::string root() const { return chroot + "/" + prefix; }
};

// Reads `uri` (scheme zk or zookeeper). Throws Error(invalid_argument) naming what is wrong:
// no host, an unknown parameter, a bad duration, a user without a password, a chroot or
// prefix that is not a valid ZooKeeper path (empty segment, ".", "..", "zookeeper" at the
// top, control bytes), a session timeout under 100ms. Throws Error(unsupported) for zks://
// (TLS) and for a SASL request: the Debian C client has neither.
ZkOptions parse_options(const Uri& uri);

}  // namespace dlock::zookeeper
