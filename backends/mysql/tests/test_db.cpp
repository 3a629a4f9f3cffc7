#include "test_db.h"

#include "innodb_trx.h"

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
  query("CREATE TABLE IF NOT EXISTS `" + name_ + "`.it_fence (k INT PRIMARY KEY) ENGINE=InnoDB");
  query("INSERT IGNORE INTO `" + name_ + "`.it_fence VALUES (1)");
  auto c = admin();  // no default database: it never counts itself
  return fenced_lock_transactions(*c, name_, "it_fence", waiting_too);
}

}  // namespace dlock::mysql::test
