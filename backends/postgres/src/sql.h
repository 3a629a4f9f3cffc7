// The SQL of the advisory mode, built once per backend. Schema and table are checked plain
// identifiers (options.cpp) and double-quoted here; every value travels as a bound
// parameter ($1 the bigint key, $2 the bytea identity), so names never reach SQL text.
//
// Two objects back the mode (README.md, "Keys and collisions" and "Fencing"):
//   <table>         one row per advisory key in use: the identity that owns it. Written once
//                   per key, ever (claim); never on the acquire path.
//   <table>_token   a sequence: every grant's fencing token is its nextval. Raised to the
//                   server clock (µs) by every new lock connection (bump), so a crash that
//                   loses the sequence's last (asynchronously committed) advances restarts
//                   it above every token handed out before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <libpq-fe.h>

namespace dlock::postgres {

// Prepared-statement names, as PREPAREd on every lock connection.
namespace stmt {
inline constexpr const char* claim = "dlock_claim";    // ($1 key, $2 identity) -> t | f | NULL
inline constexpr const char* try_x = "dlock_try_x";    // ($1 key) -> got, token
inline constexpr const char* try_s = "dlock_try_s";
inline constexpr const char* wait_x = "dlock_wait_x";  // ($1 key, $2 lock_timeout ms) -> got, token
inline constexpr const char* wait_s = "dlock_wait_s";
inline constexpr const char* unlock_x = "dlock_unlock_x";  // ($1 key) -> t | f
inline constexpr const char* unlock_s = "dlock_unlock_s";
// ($1 a server process id, bigint) -> t if it was signalled, f if not a backend of this
// user, no row if it is not waiting for a lock: ends another session's lock wait.
inline constexpr const char* cancel = "dlock_cancel";
}  // namespace stmt

struct AdvisorySql {
  // CREATE TABLE / SEQUENCE IF NOT EXISTS (the owner table and the token sequence), each
  // only if missing (create_if_missing), then the upgrade of an earlier build's table.
  std::string create_table;
  // One simple query that PREPAREs every statement above and bumps the sequence to the
  // server clock (1 round trip per connection).
  std::string prepare_all;

  AdvisorySql(const std::string& schema, const std::string& table);
};

// The (int, int) advisory key that orders the sequence bump before every token: acquires
// take it shared (transaction-scoped, after the grant), the bump exclusive. The two-int
// form never meets a name's key (single bigint, pg_locks.objsubid = 1).
inline constexpr std::int32_t bump_lock_class = 0x646c6f63;  // "dloc"

// One row of an acquire statement (try or wait). Throws Error(internal) for any other shape.
struct AcquireRow {
  bool got = false;                   // the advisory lock is held by the session now
  std::optional<std::int64_t> token;  // the fencing token (present exactly when got)
};
AcquireRow parse_acquire_row(const PGresult* r);

// The claim's answer: the key is the identity's (true), another identity's (false), or not
// yet visible to this statement's snapshot (nullopt: a concurrent claim; ask again).
std::optional<bool> parse_claim_row(const PGresult* r);

// True when an unlock (or cancel) statement answered t.
bool parse_unlock_row(const PGresult* r);

// "<schema>"."<table>" (the parts are plain identifiers already).
std::string qualified(const std::string& schema, const std::string& table);

// `create` (a CREATE … IF NOT EXISTS of the relation `qualified_name`) run only when no
// such relation exists: CREATE … IF NOT EXISTS alone needs the CREATE privilege on the
// schema even when the relation is there, so every open would.
std::string create_if_missing(const std::string& qualified_name, const std::string& create);

// The token sequence's name: <table>_token, the table cut to 57 bytes so it stays a
// PostgreSQL identifier (two tables may then share a sequence, which is harmless).
std::string token_sequence(const std::string& table);

}  // namespace dlock::postgres
