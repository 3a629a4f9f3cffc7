#include "sql.h"

namespace dlock::mysql {
namespace {

std::string quoted(std::string_view identifier) { return "`" + std::string(identifier) + "`"; }

}  // namespace

Batch setup_batch(std::chrono::seconds session, std::chrono::seconds lock_wait, bool autocommit) {
  Batch b;
  // READ COMMITTED: no gap locks on a missing row, no long-lived read view. wait_timeout = S
  // frees a silent holder's lock after S (also inside a transaction); MariaDB's idle
  // transaction timeouts are zeroed so nothing on the server ends the session before S.
  b.text =
      "SET autocommit=" + std::string(autocommit ? "1" : "0") + ", time_zone='+00:00', SESSION wait_timeout=" + std::to_string(session.count()) +
      ", SESSION innodb_lock_wait_timeout=" + std::to_string(lock_wait.count()) +
      ", SESSION idle_transaction_timeout=0, SESSION idle_readonly_transaction_timeout=0"
      ", SESSION idle_write_transaction_timeout=0;"
      "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"
      "SELECT CONNECTION_ID(), VERSION(), @@wsrep_on, "
      "(SELECT HOST FROM information_schema.PROCESSLIST WHERE ID=CONNECTION_ID())";
  b.statements = 3;
  return b;
}

Batch create_tables_batch(std::string_view table, std::uint64_t start) {
  Batch b;
  b.text = "CREATE TABLE IF NOT EXISTS " + quoted(table) +
           " (k BINARY(32) NOT NULL PRIMARY KEY, name VARBINARY(1024) NOT NULL) ENGINE=InnoDB;"
           "CREATE SEQUENCE IF NOT EXISTS " + quoted(std::string(table) + "_seq") +
           " START WITH " + std::to_string(start) + " CACHE 1000 ENGINE=InnoDB";
  b.statements = 2;
  return b;
}

Batch lock_batch(std::string_view table, std::string_view key_hex, LockMode mode, Wait wait,
                 bool rollback_first) {
  Batch b;
  if (rollback_first) b.text = "ROLLBACK;";
  b.text += "SELECT NEXTVAL(" + quoted(std::string(table) + "_seq") + ") FROM " + quoted(table) +
            " WHERE k=X'" + std::string(key_hex) + "'";
  b.text += mode == LockMode::shared ? " LOCK IN SHARE MODE" : " FOR UPDATE";
  b.text += wait.seconds.count() == 0 ? " NOWAIT" : " WAIT " + std::to_string(wait.seconds.count());
  b.statements = rollback_first ? 2 : 1;
  return b;
}

std::string prepared_lock_sql(std::string_view table, LockMode mode) {
  return "SELECT NEXTVAL(" + quoted(std::string(table) + "_seq") + ") FROM " + quoted(table) +
         " WHERE k=UNHEX(?)" + (mode == LockMode::shared ? " LOCK IN SHARE MODE" : " FOR UPDATE") + " NOWAIT";
}

Batch insert_row_batch(std::string_view table, std::string_view key_hex, std::string_view name_hex) {
  Batch b;
  b.text = "ROLLBACK;SET STATEMENT innodb_lock_wait_timeout=0 FOR INSERT IGNORE INTO " + quoted(table) +
           " (k, name) VALUES (X'" + std::string(key_hex) + "', X'" + std::string(name_hex) + "');COMMIT";
  b.statements = 3;
  return b;
}

Batch catch_up_sequence_batch(std::string_view table) {
  Batch b;
  // SETVAL takes literals only: the clock is spliced in on the server (one round trip).
  // The table name is an identifier checked by the URI parser, never user data.
  b.text = "EXECUTE IMMEDIATE CONCAT('SELECT SETVAL(" + quoted(std::string(table) + "_seq") +
           ", ', CAST(UNIX_TIMESTAMP(NOW(6))*1000000 AS UNSIGNED), ')')";
  b.statements = 1;
  return b;
}

}  // namespace dlock::mysql
