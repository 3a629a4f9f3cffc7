#include "sql.h"

#include <charconv>
#include <string_view>

#include "dlock/error.h"

namespace dlock::postgres {
namespace {

// The acquire: take the advisory lock ($lock is pg_try_advisory_lock[_shared] or, for a
// waiter, pg_advisory_lock[_shared] made boolean) and, in the same statement, advance the
// key's fencing counter with a server-clock floor (µs), only if the row belongs to this
// identity. Answers one row:
//   got     the advisory lock was taken (it stays taken whatever else the row says);
//   token   the fencing token, NULL when the key's row belongs to another identity (a hash
//           collision: the caller unlocks and moves to its next candidate key);
//   foreign when not got: the key's row belongs to another identity (collision, not busy).
// The CTE is MATERIALIZED so the lock function runs exactly once.
std::string acquire(const std::string& table, const std::string& lock_expr) {
  const std::string now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
  return "WITH l AS MATERIALIZED (SELECT " + lock_expr + " AS got), "
         "u AS (INSERT INTO " + table + " AS f (key, name, token) "
         "SELECT $1, $2, " + now_us + " FROM l WHERE l.got "
         "ON CONFLICT (key) DO UPDATE SET token = GREATEST(f.token + 1, EXCLUDED.token) "
         "WHERE f.name = EXCLUDED.name RETURNING f.token) "
         "SELECT l.got, (SELECT token FROM u), CASE WHEN l.got THEN false ELSE EXISTS "
         "(SELECT 1 FROM " + table + " WHERE key = $1 AND name <> $2) END FROM l";
}

std::string prepare(const char* name, const std::string& types, const std::string& body) {
  return std::string("PREPARE ") + name + "(" + types + ") AS " + body + ";\n";
}

}  // namespace

std::string qualified(const std::string& schema, const std::string& table) {
  return "\"" + schema + "\".\"" + table + "\"";
}

AdvisorySql::AdvisorySql(const std::string& schema, const std::string& table) {
  const std::string t = qualified(schema, table);
  create_table = "CREATE TABLE IF NOT EXISTS " + t +
                 " (key bigint PRIMARY KEY, name bytea NOT NULL, token bigint NOT NULL)";
  // pg_advisory_lock returns void; ::text = '' turns it into a boolean true after the wait.
  prepare_all = prepare(stmt::try_x, "bigint, bytea", acquire(t, "pg_try_advisory_lock($1)")) +
                prepare(stmt::try_s, "bigint, bytea", acquire(t, "pg_try_advisory_lock_shared($1)")) +
                prepare(stmt::wait_x, "bigint, bytea", acquire(t, "pg_advisory_lock($1)::text = ''")) +
                prepare(stmt::wait_s, "bigint, bytea", acquire(t, "pg_advisory_lock_shared($1)::text = ''")) +
                prepare(stmt::unlock_x, "bigint", "SELECT pg_advisory_unlock($1)") +
                prepare(stmt::unlock_s, "bigint", "SELECT pg_advisory_unlock_shared($1)");
}

AcquireRow parse_acquire_row(const PGresult* r) {
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 3) {
    throw Error(ErrorCode::internal, "postgres: unexpected answer to an acquire statement");
  }
  AcquireRow row;
  row.got = std::string_view(PQgetvalue(r, 0, 0)) == "t";
  if (!PQgetisnull(r, 0, 1)) {
    std::string_view text = PQgetvalue(r, 0, 1);
    std::int64_t token = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), token);
    if (ec != std::errc{} || ptr != text.data() + text.size() || token <= 0) {
      throw Error(ErrorCode::internal, "postgres: a fencing token that is not a positive number");
    }
    row.token = token;
  }
  row.foreign = std::string_view(PQgetvalue(r, 0, 2)) == "t";
  return row;
}

bool parse_unlock_row(const PGresult* r) {
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 1) {
    throw Error(ErrorCode::internal, "postgres: unexpected answer to an unlock statement");
  }
  return std::string_view(PQgetvalue(r, 0, 0)) == "t";
}

}  // namespace dlock::postgres
