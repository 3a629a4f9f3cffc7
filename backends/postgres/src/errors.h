// The one place that turns libpq failures (connection errors and error results) into
// dlock::Error with a clear message. Messages name the server ("postgres host:port/db"),
// never a password (libpq's own messages carry none).
#pragma once

#include <string>
#include <string_view>

#include <libpq-fe.h>

#include "dlock/error.h"

namespace dlock::postgres {

// SQLSTATEs the backend acts on.
namespace sqlstate {
inline constexpr std::string_view lock_not_available = "55P03";  // lock_timeout ran out
inline constexpr std::string_view query_canceled = "57014";      // PQcancel
}  // namespace sqlstate

// The SQLSTATE of `result` ("" when none).
std::string sqlstate_of(const PGresult* result);

// Translates the failure of `doing` against `where`:
//   a connection that failed to open (result null, conn not OK): by libpq's message —
//     password authentication failed / no password supplied → invalid_argument;
//     database "…" does not exist, role "…" does not exist, no pg_hba.conf entry,
//     pg_hba reject → invalid_argument; an unrecognized configuration parameter (a server
//     older than 14 has no idle_session_timeout) → unsupported; anything else (refused,
//     timeout, reset, too many connections, the database system is starting up) → unavailable;
//   an error result, by SQLSTATE class — 28 (auth), 3D (no database), 3F000 (no schema), 42501 (privilege),
//     42P01 (no table), 42 otherwise → invalid_argument; 25006 (read-only: a hot standby),
//     53 (resources: 53200 out of shared memory = the lock table is full), 57P0x (terminated,
//     shutdown), 08 (connection) → unavailable; anything else → internal.
//   a lost connection (result null or fatal with the connection bad) → unavailable.
Error translate_error(std::string_view where, std::string_view doing, const PGconn* conn,
                      const PGresult* result);

}  // namespace dlock::postgres
