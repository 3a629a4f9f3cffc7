// The SQL text the row-mode backend sends. Only dlock-built values are spliced in: table
// names checked against [A-Za-z0-9_], 64-hex-digit keys, hex-encoded names and numbers.
// Lock names never reach SQL as text.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/options.h"

namespace dlock::mysql {

// A statement batch: the text and how many statements it holds (Connector/C++ 1.1 cannot
// tell "no more results" apart, so results are consumed by count).
struct Batch {
  std::string text;
  int statements = 1;
};

// Session setup of a lock connection (one round trip). Its last statement returns one row:
// CONNECTION_ID(), VERSION(), @@wsrep_on, the client address the server sees ("ip:port").
// `lock_wait` is innodb_lock_wait_timeout in seconds (0: fail at once). Row mode runs with
// autocommit off (a hold is an open transaction), lease mode with it on.
Batch setup_batch(std::chrono::seconds session, std::chrono::seconds lock_wait, bool autocommit = false);

// The DDL (also shipped as backends/mysql/schema.sql): the lock table and its sequence,
// whose first value is `start` (the server clock in µs, so a lost counter restarts above
// every earlier token).
Batch create_tables_batch(std::string_view table, std::uint64_t start);

// How a row-lock statement waits for a busy row.
struct Wait {
  std::chrono::seconds seconds{0};  // 0: NOWAIT (error 1205 at once)
};

// Locks the row `key_hex` (exclusive: FOR UPDATE, shared: LOCK IN SHARE MODE) and returns
// NEXTVAL of the sequence as its one column: 1 row = granted, 0 rows = no row yet, error
// 1205 = busy (or the wait ran out). `rollback_first` prefixes a ROLLBACK that clears a
// transaction left open by an earlier busy attempt, in the same round trip.
Batch lock_batch(std::string_view table, std::string_view key_hex, LockMode mode, Wait wait,
                 bool rollback_first);

// The NOWAIT lock statement with the key as its one parameter (hex), for a prepared
// statement: "SELECT NEXTVAL(`t_seq`) FROM `t` WHERE k=UNHEX(?) FOR UPDATE NOWAIT".
std::string prepared_lock_sql(std::string_view table, LockMode mode);

// Creates the row of a name (a no-op if it exists). It fails with 1205 at once if the row
// exists and is locked, which the caller treats as "exists".
Batch insert_row_batch(std::string_view table, std::string_view key_hex, std::string_view name_hex);

// Moves the table's sequence up to the server clock in µs (SETVAL never moves it down), so
// tokens stay above those handed out before a server crash lost the sequence's cache state.
// Fails with 1146 when the sequence does not exist yet.
Batch catch_up_sequence_batch(std::string_view table);

}  // namespace dlock::mysql
