// The mysql backend's settings, read from its URI (documented in backends/mysql/README.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "dlock/uri.h"

namespace dlock::mysql {

enum class Mode { row, lease };

struct MysqlOptions {
  std::string host;       // TCP host; empty for a unix socket
  std::uint16_t port = 3306;
  std::string unix_path;  // mysql+unix:// socket path; empty for TCP
  std::string user;
  std::optional<std::string> password;
  std::string database;
  std::string table = "dlock_lock";  // row: also names <table>_seq; lease: default dlock_lease
  std::string prefix;                // hashed into the key: namespaces sharing one table
  Mode mode = Mode::row;
  // S: wait_timeout of every lock connection (row mode); the default lease (lease mode).
  std::chrono::milliseconds session_timeout{10000};
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds command_timeout{2000};
  std::chrono::seconds wait_chunk{30};  // TCP keepalive idle time of a waiter connection
  std::size_t pool = 64;                // most connections open at once
  bool create_tables = true;
  std::string ssl_ca, ssl_cert, ssl_key;  // TLS: ssl_ca makes it fail closed
  std::string where;  // "mysql 127.0.0.1:3306/db": for messages, never a password

  // ceil(S) in whole seconds: wait_timeout takes seconds.
  std::chrono::seconds session_seconds() const {
    return std::chrono::ceil<std::chrono::seconds>(session_timeout);
  }
  // The server's wait_timeout for our connections: S in row mode (the dead-client bound);
  // in lease mode nothing depends on the session, so an hour keeps pooled connections.
  std::chrono::seconds server_wait_timeout() const {
    return mode == Mode::row ? session_seconds() : std::chrono::seconds(3600);
  }
  // An idle pooled connection older than this is dropped before use (the server would end
  // it at server_wait_timeout()).
  std::chrono::milliseconds idle_limit() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(server_wait_timeout()) / 2;
  }
};

// Reads `uri` (scheme mysql, mariadb or mysql+unix). Throws Error(invalid_argument) naming
// what is wrong: unknown parameter, bad number or duration, missing host, database or socket
// path, several hosts, a table name that is not [A-Za-z0-9_]{1,54}, a prefix over 256 bytes,
// an unknown mode, ssl_cert without ssl_key (or the reverse).
MysqlOptions parse_options(const Uri& uri);

}  // namespace dlock::mysql
