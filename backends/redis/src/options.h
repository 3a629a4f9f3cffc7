// The redis backend's settings, read from its URI (documented in backends/redis/README.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "dlock/uri.h"

namespace dlock::redis {

struct RedisOptions {
  std::string host;       // TCP host; empty for a unix socket
  std::uint16_t port = 6379;
  std::string unix_path;  // redis+unix:// socket path; empty for TCP
  std::string user;       // ACL user; empty: the password alone (AUTH <password>)
  std::optional<std::string> password;
  std::uint32_t db = 0;
  std::string prefix = "dlock:";
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds command_timeout{2000};
  std::size_t pool = 8;  // most connections open at once for commands (the subscriber has its own)
  std::chrono::milliseconds lease{30000};           // default lease, renewed by the watchdog
  std::chrono::milliseconds fair_heartbeat{3000};   // a queued waiter silent this long is dropped
  // After data loss (the dataset marker missing, or written under another server run_id),
  // grant nothing for this long: holds the server forgot must first run out or be reported
  // lost. Empty: the lease. 0: off.
  std::optional<std::chrono::milliseconds> restart_grace;
  // Accept a server whose maxmemory-policy may evict keys (volatile-*, allkeys-*): a held
  // lock's key is then the first victim. Off: such a server is refused at connect.
  bool allow_eviction = false;
  std::string where;  // "redis 127.0.0.1:6379" or "redis unix:/path": for messages, never a password
};

// Reads `uri` (scheme redis or redis+unix). Throws Error(invalid_argument) naming what is
// wrong: unknown parameter, bad number or duration, missing host or socket path, several
// hosts, a db path that is not a number, a prefix with '{' or '}' (it would break the
// hash tag) or longer than 256 bytes, a fair_heartbeat longer than lease/2.
RedisOptions parse_options(const Uri& uri);

}  // namespace dlock::redis
