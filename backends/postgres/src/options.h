// The postgres backend's settings, read from its URI (documented in backends/postgres/README.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlock/uri.h"

namespace dlock::postgres {

enum class Mode { advisory, lease };

struct PgOptions {
  Mode mode = Mode::advisory;
  // libpq connection keywords and values (host, port, dbname, user, password and the
  // whitelisted pass-through parameters), handed to PQconnectStartParams as they are.
  // Never printed: it may hold the password.
  std::vector<std::pair<std::string, std::string>> conninfo;
  std::string prefix = "dlock:";       // hashed into the advisory key (namespaces share a table)
  std::string schema = "public";
  std::string table = "dlock_fence";   // dlock_lease in lease mode
  std::chrono::milliseconds session_timeout{10000};  // S: the dead-client bound
  std::chrono::milliseconds wait_chunk{10000};       // longest single server-side wait; 0: none
  std::chrono::milliseconds lease{30000};             // lease mode: default lease
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds command_timeout{2000};
  std::size_t pool = 16;  // most connections open at once (holders and waiters)
  bool create_tables = true;
  std::string application_name = "dlock";
  std::string where;  // "postgres 127.0.0.1:5432/db": for messages, never a password
};

// Reads `uri` (scheme postgres or postgresql, libpq's URI form: several comma-separated
// hosts, a percent-encoded socket directory as host, /database). Throws
// Error(invalid_argument) naming what is wrong: no database, a libpq parameter outside the
// whitelist, an sslmode or target_session_attrs libpq 15 does not know, an unknown parameter, a bad number or duration, a bad mode, an identifier
// (schema, table) that is not [A-Za-z_][A-Za-z0-9_]* of at most 63 bytes, a prefix longer
// than 256 bytes, session_timeout below 1s, wait_chunk below 100ms (other than 0).
PgOptions parse_options(const Uri& uri);

// The libpq parameters a URI may pass through (besides password, user and dbname).
const std::vector<std::string>& passthrough_parameters();

}  // namespace dlock::postgres
