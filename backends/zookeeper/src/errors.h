// The one place that turns ZooKeeper C client return codes into dlock::Error with a clear
// message. Messages name the ensemble ("zookeeper h1:p1,h2:p2") and the node, never a
// password.
#pragma once

#include <string>
#include <string_view>

#include "dlock/error.h"

namespace dlock::zookeeper {

// The client's own code for "no answer within command_timeout" (not a ZOO_ERRORS value).
inline constexpr int kTimedOut = -100000;

// `text` for a message: well-formed UTF-8 of the characters a ZooKeeper path may hold
// (zk_path_char: printable ASCII, and no C1 control, private-use or special character) kept,
// every other byte written as %XX, so no raw non-printable byte reaches a log or a terminal.
std::string printable(std::string_view text);

// Translates the failure `rc` of `doing` on `node` ("" if none) against `where`:
//   connection loss, operation timeout, session expired/moved, invalid state (a dead
//   handle), closing, throttled, system error, a reply out of order (runtime
//   inconsistency), kTimedOut → unavailable (retry later);
//   no auth / auth failed / invalid ACL → invalid_argument naming the node (fix the ACL or
//   the credentials in the URI); bad arguments → invalid_argument; unimplemented →
//   unsupported; anything else (an unexpected no-node, node-exists…) → internal.
// REQUIRES: rc != ZOK.
Error translate_error(std::string_view where, std::string_view doing, std::string_view node, int rc);

// True for the codes that mean "the connection or session failed, the request may or may
// not have been applied" (retry or re-check, never conclude).
bool is_transport_error(int rc) noexcept;

}  // namespace dlock::zookeeper
