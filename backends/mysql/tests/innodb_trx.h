// Reading who holds row locks in a database from information_schema.INNODB_TRX, fresh.
//
// INNODB_TRX is a cache the server refills only when nobody read it in the last 100 ms:
// polled faster, it shows one old snapshot for ever (the conformance saboteur saw a killed
// holder of the previous case there, never the current one). The fence: the reading
// connection opens a transaction of its own first (a shared lock on a one-row table), and a
// snapshot counts only once it lists that transaction, i.e. it was taken after the call began.
// Shared by the integration tests (test_db.cpp) and the conformance context.
#pragma once

#include <cppconn/connection.h>

#include <string>
#include <vector>

namespace dlock::mysql::test {

// Connection ids with a transaction open in database `db` that is not waiting (every one:
// trx_rows_locked is approximate, and only holders keep a transaction open there) and, with
// waiting_too, those waiting for a lock too. `reader` must have no default database (so it
// never counts itself) and the PROCESS privilege; `fence_table` is a one-row InnoDB table in
// `db` (k INT PRIMARY KEY). Throws std::runtime_error when no fresh snapshot comes within 5 s
// (another client polling INNODB_TRX faster than every 100 ms).
std::vector<std::string> fenced_lock_transactions(sql::Connection& reader, const std::string& db,
                                                  const std::string& fence_table, bool waiting_too);

}  // namespace dlock::mysql::test
