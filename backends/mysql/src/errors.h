// The one place that turns Connector/C++ failures into dlock::Error with a clear message.
// Messages name the server ("mysql host:port/db"), never a password.
#pragma once

#include <string_view>

#include <cppconn/exception.h>

#include "dlock/error.h"

namespace dlock::mysql {

// Server and client error numbers the backend acts on.
namespace code {
inline constexpr int access_denied = 1045;        // wrong user or password
inline constexpr int db_access_denied = 1044;     // no rights on the database
inline constexpr int unknown_database = 1049;
inline constexpr int command_denied = 1142;       // e.g. CREATE denied on a table
inline constexpr int no_such_table = 1146;
inline constexpr int unknown_sequence = 4091;    // SETVAL/NEXTVAL on a sequence not created yet
inline constexpr int unknown_column = 1054;       // e.g. a row-mode table given to mode=lease
inline constexpr int lock_wait_timeout = 1205;    // NOWAIT busy, WAIT n ran out
inline constexpr int deadlock = 1213;
inline constexpr int query_interrupted = 1317;    // KILL QUERY
inline constexpr int read_only = 1290;            // --read-only
inline constexpr int too_many_connections = 1040;
inline constexpr int server_shutdown = 1053;
inline constexpr int connection_killed = 1927;    // MariaDB: KILL CONNECTION
inline constexpr int cant_connect_local = 2002;   // closed port / missing socket
inline constexpr int cant_connect = 2003;
inline constexpr int unknown_host = 2005;
inline constexpr int gone_away = 2006;
inline constexpr int lost_connection = 2013;
inline constexpr int tls_error = 2026;
}  // namespace code

// Translates the failure of `doing` against `where`:
//   1045, 1044, 1049, 1142 and other privilege errors → invalid_argument (fix the URI or the
//   grants); 2026 (TLS required but refused or unverifiable) → unavailable naming TLS;
//   2002/2003/2005 (unresolvable host)/2006/2013, 1040, 1053, 1927, 1290 (read-only), 1205,
//   1213, 1317 → unavailable;
//   anything else → internal.
Error translate_error(std::string_view where, std::string_view doing, const sql::SQLException& e);

// True for errors that mean the connection itself is gone (the session ended).
bool connection_lost(const sql::SQLException& e) noexcept;

}  // namespace dlock::mysql
