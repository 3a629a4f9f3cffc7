#include "sql.h"

#include <charconv>
#include <string_view>

#include "dlock/error.h"

namespace dlock::postgres {
namespace {

const std::string now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

// The acquire: take the advisory lock ($lock is pg_try_advisory_lock[_shared] or, for a
// waiter, pg_advisory_lock[_shared] made boolean) and, only when it was taken, the next
// token. The lock call sits in a subquery that cannot be flattened (OFFSET 0: it runs
// exactly once); the token is an uncorrelated subquery, which PostgreSQL evaluates at most
// once and only when the CASE reaches it, so a busy try consumes no token. The
// transaction-scoped shared lock orders the nextval against a concurrent bump (see
// bump()); it is taken after the grant, so a waiter never holds it while it waits.
// `from` (a waiter's) is the FROM clause of the lock call's subquery.
std::string acquire(const std::string& seq_literal, const std::string& lock_expr, std::int32_t bump_obj,
                    const std::string& from = "") {
  return "SELECT l.got, CASE WHEN l.got THEN (SELECT nextval(" + seq_literal +
         ") FROM (SELECT pg_advisory_xact_lock_shared(" + std::to_string(bump_lock_class) + ", " +
         std::to_string(bump_obj) + ")) b) END FROM (SELECT " + lock_expr + " AS got" + from +
         " OFFSET 0) l";
}

// A waiter's lock_timeout ($2, in ms; '0': none), set for this statement only (is_local:
// the implicit transaction's end restores the session's value) by a subquery that runs
// before the lock call reads it: the server ends the wait at the caller's deadline or at
// the chunk's end, whichever comes first, with no cancel from outside.
const std::string wait_timeout_from =
    " FROM (SELECT set_config('lock_timeout', $2, true) AS lt OFFSET 0) t";

// The claim of a key for an identity (once per key, ever: owner rows never change). The
// INSERT wins or meets an existing row; in the second case the SELECT reads the owner,
// unless that row was committed after this statement's snapshot (NULL: ask again).
std::string claim(const std::string& table) {
  return "WITH ins AS (INSERT INTO " + table + " (key, name) VALUES ($1, $2) "
         "ON CONFLICT (key) DO NOTHING RETURNING true AS mine) "
         "SELECT COALESCE((SELECT mine FROM ins), (SELECT name = $2 FROM " + table + " WHERE key = $1))";
}

// The bump, run by every new lock connection before its first acquire: raises the token
// sequence to the server clock in µs (never lowers it). Holding the bump lock exclusive
// keeps every nextval out between reading the sequence and setting it, so no token handed
// out concurrently can end up above the new value.
std::string bump(const std::string& seq_literal, std::int32_t bump_obj) {
  return "BEGIN;\nSELECT pg_advisory_xact_lock(" + std::to_string(bump_lock_class) + ", " +
         std::to_string(bump_obj) + ");\nSELECT setval(" + seq_literal + ", GREATEST(nextval(" +
         seq_literal + "), " + now_us + "));\nCOMMIT;\n";
}

std::string prepare(const char* name, const std::string& types, const std::string& body) {
  return std::string("PREPARE ") + name + "(" + types + ") AS " + body + ";\n";
}

// A 31-bit FNV-1a of the sequence's qualified name: one bump lock per sequence.
std::int32_t bump_object(std::string_view qualified_seq) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : qualified_seq) h = (h ^ c) * 16777619u;
  return static_cast<std::int32_t>(h & 0x7fffffff);
}

// An earlier build's table has a `token bigint NOT NULL` column that this build does not
// write: the column becomes nullable (the earlier build's clients keep working beside this
// one) and the sequence starts above every token that build handed out. Runs once: the
// condition is false afterwards. Identifiers are validated (options.cpp): no quote occurs.
std::string upgrade_earlier_table(const std::string& t, const std::string& seq,
                                  const std::string& seq_literal) {
  const std::string t_literal = "'" + t + "'::regclass";
  return "DO $dlock$ BEGIN IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = " + t_literal +
         " AND attname = 'token' AND attnotnull AND NOT attisdropped) THEN "
         "ALTER TABLE " + t + " ALTER COLUMN token DROP NOT NULL; "
         "PERFORM setval(" + seq_literal + ", GREATEST((SELECT last_value FROM " + seq + "), "
         "(SELECT max(token) FROM " + t + "), 1)); "
         "END IF; END $dlock$";
}

}  // namespace

std::string qualified(const std::string& schema, const std::string& table) {
  return "\"" + schema + "\".\"" + table + "\"";
}

std::string create_if_missing(const std::string& qualified_name, const std::string& create) {
  // A plain-identifier name holds no quote: it can stand in a literal as it is.
  return "DO $dlock$ BEGIN IF to_regclass('" + qualified_name + "') IS NULL THEN " + create +
         "; END IF; END $dlock$;\n";
}

std::string token_sequence(const std::string& table) { return table.substr(0, 57) + "_token"; }

AdvisorySql::AdvisorySql(const std::string& schema, const std::string& table) {
  const std::string t = qualified(schema, table);
  const std::string seq = qualified(schema, token_sequence(table));
  // A regclass literal: the names are plain identifiers, so no quote can occur in them.
  const std::string seq_literal = "'" + seq + "'::regclass";
  const std::int32_t obj = bump_object(seq);
  create_table = create_if_missing(t, "CREATE TABLE IF NOT EXISTS " + t + " (key bigint PRIMARY KEY, name bytea NOT NULL)") +
                 create_if_missing(seq, "CREATE SEQUENCE IF NOT EXISTS " + seq + " AS bigint") +
                 upgrade_earlier_table(t, seq, seq_literal);
  // pg_advisory_lock returns void; ::text = '' turns it into a boolean true after the wait.
  prepare_all = prepare(stmt::claim, "bigint, bytea", claim(t)) +
                prepare(stmt::try_x, "bigint", acquire(seq_literal, "pg_try_advisory_lock($1)", obj)) +
                prepare(stmt::try_s, "bigint", acquire(seq_literal, "pg_try_advisory_lock_shared($1)", obj)) +
                prepare(stmt::wait_x, "bigint, text",
                        acquire(seq_literal, "pg_advisory_lock($1)::text = ''", obj, wait_timeout_from)) +
                prepare(stmt::wait_s, "bigint, text",
                        acquire(seq_literal, "pg_advisory_lock_shared($1)::text = ''", obj,
                                wait_timeout_from)) +
                prepare(stmt::unlock_x, "bigint", "SELECT pg_advisory_unlock($1)") +
                prepare(stmt::unlock_s, "bigint", "SELECT pg_advisory_unlock_shared($1)") +
                prepare(stmt::cancel, "bigint",
                        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = $1 "
                        "AND wait_event_type = 'Lock'") +
                bump(seq_literal, obj);
}

AcquireRow parse_acquire_row(const PGresult* r) {
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 2) {
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
  if (row.got != row.token.has_value()) {
    throw Error(ErrorCode::internal, "postgres: an acquire answered a grant without a token");
  }
  return row;
}

std::optional<bool> parse_claim_row(const PGresult* r) {
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 1) {
    throw Error(ErrorCode::internal, "postgres: unexpected answer to a key claim");
  }
  if (PQgetisnull(r, 0, 0)) return std::nullopt;
  return std::string_view(PQgetvalue(r, 0, 0)) == "t";
}

bool parse_unlock_row(const PGresult* r) {
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 1) {
    throw Error(ErrorCode::internal, "postgres: unexpected answer to an unlock statement");
  }
  return std::string_view(PQgetvalue(r, 0, 0)) == "t";
}

}  // namespace dlock::postgres
