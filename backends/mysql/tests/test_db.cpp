#include "test_db.h"

#include <cppconn/driver.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "dlock/uri.h"

namespace dlock::mysql::test {

std::string server_uri() {
  const char* v = std::getenv("DLOCK_TEST_MYSQL_URI");
  return v == nullptr ? "" : v;
}

namespace {

std::unique_ptr<sql::Connection> admin(bool root = false) {
  const Uri u = Uri::parse(server_uri());
  static std::mutex mu;
  sql::mysql::MySQL_Driver* driver = nullptr;
  {
    std::lock_guard lock(mu);
    driver = sql::mysql::get_mysql_driver_instance();
  }
  sql::ConnectOptionsMap o;
  o["hostName"] = sql::SQLString(u.hosts.at(0).host);
  o["port"] = static_cast<int>(u.hosts.at(0).port ? u.hosts.at(0).port : 3306);
  o["userName"] = sql::SQLString(root ? std::string("root") : u.user);
  o["password"] = sql::SQLString(root ? std::string() : u.password.value_or(""));
  o["OPT_RECONNECT"] = false;
  o["OPT_CONNECT_TIMEOUT"] = 5;
  o["OPT_READ_TIMEOUT"] = 30;
  return std::unique_ptr<sql::Connection>(driver->connect(o));
}

}  // namespace

TestDb::TestDb() {
  if (server_uri().empty()) throw std::runtime_error(kNoServerMessage);
  static std::atomic<int> counter{0};
  name_ = "dlock_it_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  query("DROP DATABASE IF EXISTS `" + name_ + "`");
  query("CREATE DATABASE `" + name_ + "`");
}

TestDb::~TestDb() {
  try {
    query("DROP DATABASE IF EXISTS `" + name_ + "`");
  } catch (...) {
  }
}

std::string TestDb::uri(const std::string& params) const {
  Uri u = Uri::parse(server_uri());
  std::string s = "mysql://" + u.user + (u.password ? ":" + *u.password : "") + "@" +
                  u.hosts.at(0).host + ":" + std::to_string(u.hosts.at(0).port) + "/" + name_;
  if (!params.empty()) s += "?" + params;
  return s;
}

std::vector<std::string> TestDb::query(const std::string& text) const {
  auto c = admin();
  std::unique_ptr<sql::Statement> s(c->createStatement());
  std::vector<std::string> out;
  if (s->execute(sql::SQLString(text))) {
    std::unique_ptr<sql::ResultSet> rs(s->getResultSet());
    while (rs->next()) out.push_back(rs->getString(1).asStdString());
  }
  return out;
}

void TestDb::run_as_root(const std::string& text) {
  auto c = admin(/*root=*/true);
  std::unique_ptr<sql::Statement> s(c->createStatement());
  s->execute(sql::SQLString(text));
}

std::vector<std::string> TestDb::lock_transactions(bool waiting_too) const {
  // INNODB_TRX is a cache the server refills only when nobody read it in the last 100 ms:
  // polled faster (wait_until polls every millisecond) it shows one old snapshot for ever.
  // The fence: this connection opens a transaction of its own first, and a snapshot counts
  // only once it lists that transaction, i.e. it was taken after this call began.
  query("CREATE TABLE IF NOT EXISTS `" + name_ + "`.it_fence (k INT PRIMARY KEY) ENGINE=InnoDB");
  query("INSERT IGNORE INTO `" + name_ + "`.it_fence VALUES (1)");
  auto c = admin();  // no default database: p.DB never matches the fence itself
  std::unique_ptr<sql::Statement> s(c->createStatement());
  s->execute("SET autocommit=0");
  std::unique_ptr<sql::ResultSet>(s->executeQuery(sql::SQLString("SELECT k FROM `" + name_ + "`.it_fence LOCK IN SHARE MODE")));
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
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the 100 ms window
    std::unique_ptr<sql::ResultSet> rs(s->executeQuery(sql::SQLString(q)));
    bool fresh = false;
    std::vector<std::string> ids;
    while (rs->next()) {
      const std::string id = rs->getString(1).asStdString();
      if (id == own) fresh = true;
      if (rs->getString(2).asStdString() != name_) continue;
      // Every open transaction there but a waiting one holds rows (trx_rows_locked is
      // approximate): only holders and left-behind waits keep one open.
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
