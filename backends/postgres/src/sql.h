// The SQL of the advisory mode, built once per backend. Schema and table are checked plain
// identifiers (options.cpp) and double-quoted here; every value travels as a bound
// parameter ($1 the bigint key, $2 the bytea identity), so names never reach SQL text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <libpq-fe.h>

namespace dlock::postgres {

// Prepared-statement names, as PREPAREd on every lock connection.
namespace stmt {
inline constexpr const char* try_x = "dlock_try_x";    // ($1 key, $2 identity) -> got, token, foreign
inline constexpr const char* try_s = "dlock_try_s";
inline constexpr const char* wait_x = "dlock_wait_x";  // ($1 key, $2 identity) -> got, token, foreign
inline constexpr const char* wait_s = "dlock_wait_s";
inline constexpr const char* unlock_x = "dlock_unlock_x";  // ($1 key) -> t | f
inline constexpr const char* unlock_s = "dlock_unlock_s";
}  // namespace stmt

struct AdvisorySql {
  // CREATE TABLE IF NOT EXISTS <schema>.<table> (key, name, token).
  std::string create_table;
  // One simple query that PREPAREs every statement above (1 round trip per connection).
  std::string prepare_all;

  AdvisorySql(const std::string& schema, const std::string& table);
};

// One row of an acquire statement (see sql.cpp). Throws Error(internal) for any other shape.
struct AcquireRow {
  bool got = false;                   // the advisory lock is held by the session now
  std::optional<std::int64_t> token;  // the fencing token; empty: the key belongs to another name
  bool foreign = false;               // not got, and the key belongs to another name
};
AcquireRow parse_acquire_row(const PGresult* r);

// True when an unlock statement answered t.
bool parse_unlock_row(const PGresult* r);

// "<schema>"."<table>" (the parts are plain identifiers already).
std::string qualified(const std::string& schema, const std::string& table);

}  // namespace dlock::postgres
