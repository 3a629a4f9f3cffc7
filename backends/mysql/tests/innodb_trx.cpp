#include "innodb_trx.h"

#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

namespace dlock::mysql::test {

std::vector<std::string> fenced_lock_transactions(sql::Connection& reader, const std::string& db,
                                                  const std::string& fence_table, bool waiting_too) {
  std::unique_ptr<sql::Statement> s(reader.createStatement());
  s->execute("SET autocommit=0");
  std::unique_ptr<sql::ResultSet>(
      s->executeQuery(sql::SQLString("SELECT k FROM `" + db + "`.`" + fence_table + "` LOCK IN SHARE MODE")));
  std::string own;
  {
    std::unique_ptr<sql::ResultSet> rs(s->executeQuery("SELECT CONNECTION_ID()"));
    rs->next();
    own = rs->getString(1).asStdString();
  }
  const std::string q =
      "SELECT t.trx_mysql_thread_id, IFNULL(p.DB, ''), t.trx_state FROM information_schema.INNODB_TRX t "
      "LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id";
  for (int round = 0; round < 33; ++round) {
    // Past the server's 100 ms no-refill window of the previous read.
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    std::unique_ptr<sql::ResultSet> rs(s->executeQuery(sql::SQLString(q)));
    bool fresh = false;
    std::vector<std::string> ids;
    while (rs->next()) {
      const std::string id = rs->getString(1).asStdString();
      if (id == own) fresh = true;
      if (rs->getString(2).asStdString() != db) continue;
      if (rs->getString(3).asStdString() == "LOCK WAIT" && !waiting_too) continue;
      ids.push_back(id);
    }
    if (fresh) {
      s->execute("ROLLBACK");
      return ids;
    }
  }
  throw std::runtime_error("information_schema.INNODB_TRX was not refreshed within 5 s");
}

}  // namespace dlock::mysql::test
