// libpq for the postgres:// floors: a plain connection to the server a dlock URI names
// (its host, port, database, user and password; dlock's own parameters are left out).
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>

#include "dlock/uri.h"

namespace dlock_bench {

struct PgConnDeleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
using PgConnPtr = std::unique_ptr<PGconn, PgConnDeleter>;

// Connects; throws std::runtime_error with libpq's message on failure.
PgConnPtr pg_connect(const dlock::Uri& uri);

// Runs a prepared statement with one bigint text parameter; throws unless it returns a row.
// Returns the first column of the first row.
std::string pg_exec_prepared(PGconn* c, const char* stmt, const std::string& param);

// Prepares `name` as `sql`; throws on failure.
void pg_prepare(PGconn* c, const char* name, const char* sql);

}  // namespace dlock_bench
