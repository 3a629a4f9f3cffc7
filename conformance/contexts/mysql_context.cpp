// mysql:// in both modes, as two columns: "mysql" (mode=row, InnoDB row locks) and
// "mysql_lease" (mode=lease, lease rows), against the MariaDB test server named by
// DLOCK_TEST_MYSQL_URI (scripts/servers.sh start mariadb).
//
// Each case gets its own database dlock_conf_<pid>_<n> (the test user owns dlock_*; see
// servers.sh), dropped at the end. The saboteur KILLs the connections whose transactions
// hold row locks in that database (found through information_schema.INNODB_TRX, which needs
// PROCESS); residue is any such transaction, holding or waiting. The server is restarted
// through $DLOCK_SERVERS_SCRIPT. In lease mode the saboteur clears the lease rows (as a lost
// row would) and residue is any lease row still owned and unexpired.
//
// INNODB_TRX is a cache the server refills only when nobody read it in the last 100 ms, so
// every read is fenced (backends/mysql/tests/innodb_trx.h).
#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/uri.h"
#include "framework/backend_context.h"
#include "innodb_trx.h"  // backends/mysql/tests: the fenced INNODB_TRX read

namespace dlock::conformance {
namespace {

std::string base_uri() {
  const char* v = std::getenv("DLOCK_TEST_MYSQL_URI");
  if (v == nullptr || *v == '\0') throw std::runtime_error("DLOCK_TEST_MYSQL_URI not set");
  return v;
}

class MysqlEnv : public BackendEnv {
 public:
  // `extra`: parameters the variant adds to every URI (e.g. "&mode=lease").
  MysqlEnv(std::string extra, bool lease)
      : base_(Uri::parse(base_uri())), extra_(std::move(extra)), lease_(lease) {
    if (base_.hosts.empty()) throw std::runtime_error("DLOCK_TEST_MYSQL_URI has no host");
    static std::atomic<int> counter{0};
    db_ = "dlock_conf_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    run("DROP DATABASE IF EXISTS `" + db_ + "`");
    run("CREATE DATABASE `" + db_ + "`");
    run("CREATE TABLE `" + db_ + "`.conf_fence (k INT PRIMARY KEY) ENGINE=InnoDB");
    run("INSERT INTO `" + db_ + "`.conf_fence VALUES (1)");
  }

  ~MysqlEnv() override {
    try {
      run("DROP DATABASE IF EXISTS `" + db_ + "`");
    } catch (...) {
    }
  }

  std::string uri(const UriOptions& options) const override {
    std::string u = "mysql://" + base_.user;
    if (base_.password) u += ":" + *base_.password;
    u += "@" + base_.hosts[0].host + ":" + std::to_string(options.via_port ? *options.via_port : port());
    u += "/" + db_ + "?session_timeout=1s&connect_timeout=1s&command_timeout=1s" + extra_;
    return u;
  }

  void sabotage(std::string_view) override {
    if (lease_) {
      if (query("SELECT COUNT(*) FROM `" + db_ + "`.dlock_lease WHERE owner <> ''").at(0) == "0") {
        throw std::runtime_error("mysql saboteur: no lease row is owned in " + db_);
      }
      run("UPDATE `" + db_ + "`.dlock_lease SET owner = X'', expires_at = 0");
      return;
    }
    // Each read is a fresh snapshot (see holders()); a hold granted just now is in it.
    const std::vector<std::string> ids = holders(/*waiting_too=*/false);
    if (ids.empty()) {
      std::string seen;
      for (const auto& r : query("SELECT CONCAT(t.trx_mysql_thread_id, ':', t.trx_state, ':', "
                                 "t.trx_rows_locked, ':', IFNULL(p.DB, 'NULL')) FROM information_schema.INNODB_TRX t "
                                 "LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id")) {
        seen += " " + r;
      }
      throw std::runtime_error("mysql saboteur: no transaction holds a row in " + db_ + " (transactions:" + seen + ")");
    }
    for (const auto& id : ids) {
      try {
        run("KILL CONNECTION " + id);
      } catch (const sql::SQLException&) {  // already gone
      }
    }
  }

  std::vector<std::string> residue() const override {
    std::vector<std::string> out;
    if (lease_) {
      // A lease row still owned and unexpired on the server clock (the table exists once a
      // provider opened).
      try {
        for (const auto& k : query("SELECT HEX(k) FROM `" + db_ + "`.dlock_lease WHERE owner <> '' AND "
                                   "expires_at > CAST(UNIX_TIMESTAMP(NOW(6))*1000000 AS SIGNED)")) {
          out.push_back("lease row " + k);
        }
      } catch (const sql::SQLException&) {
      }
      return out;
    }
    for (const auto& id : holders(/*waiting_too=*/true)) out.push_back("transaction of connection " + id);
    return out;
  }

  std::optional<HostPort> server() const override { return HostPort{base_.hosts[0].host, port()}; }

  void restart_server() override {
    const char* script = std::getenv("DLOCK_SERVERS_SCRIPT");
    if (script == nullptr || *script == '\0') script = DLOCK_DEFAULT_SERVERS_SCRIPT;
    const std::string cmd = std::string("timeout 60 '") + script + "' restart mariadb >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      throw std::runtime_error("'" + std::string(script) + " restart mariadb' failed");
    }
  }

 private:
  std::uint16_t port() const { return base_.hosts[0].port ? base_.hosts[0].port : 3306; }

  std::unique_ptr<sql::Connection> connect() const {
    static std::mutex mu;  // get_mysql_driver_instance() is not thread-safe
    sql::mysql::MySQL_Driver* driver = nullptr;
    {
      std::lock_guard lock(mu);
      driver = sql::mysql::get_mysql_driver_instance();
    }
    sql::ConnectOptionsMap o;
    o["hostName"] = sql::SQLString(base_.hosts[0].host);
    o["port"] = static_cast<int>(port());
    o["userName"] = sql::SQLString(base_.user);
    o["password"] = sql::SQLString(base_.password.value_or(""));
    o["OPT_RECONNECT"] = false;
    o["OPT_CONNECT_TIMEOUT"] = 5;
    o["OPT_READ_TIMEOUT"] = 10;
    return std::unique_ptr<sql::Connection>(driver->connect(o));
  }

  void run(const std::string& text) const {
    auto c = connect();
    std::unique_ptr<sql::Statement> s(c->createStatement());
    s->execute(sql::SQLString(text));
  }

  std::vector<std::string> query(const std::string& text) const {
    auto c = connect();
    std::unique_ptr<sql::Statement> s(c->createStatement());
    std::unique_ptr<sql::ResultSet> rs(s->executeQuery(sql::SQLString(text)));
    std::vector<std::string> out;
    while (rs->next()) out.push_back(rs->getString(1).asStdString());
    return out;
  }

  // Connection ids with a transaction in this env's database that is not waiting (every one:
  // trx_rows_locked is approximate, and only holders keep a transaction open there), and,
  // with waiting_too, those waiting for a lock too. Read from a snapshot of INNODB_TRX taken
  // after this call began (the fence, see the top of the file); throws if the server
  // serves none within 5 s (another client polling INNODB_TRX faster than every 100 ms).
  std::vector<std::string> holders(bool waiting_too) const {
    auto c = connect();  // no default database: it never counts itself
    return mysql::test::fenced_lock_transactions(*c, db_, "conf_fence", waiting_too);
  }

  Uri base_;
  std::string extra_;
  bool lease_;
  std::string db_;
};

BackendContext make() {
  BackendContext c;
  c.backend = "mysql";
  c.scheme = "mysql";
  c.claims.reentrant = true;
  c.claims.read_write = true;
  c.claims.fair = true;
  c.claims.fencing = true;
  c.claims.push_wakeup = true;
  c.claims.liveness = Liveness::session;
  c.claims.cross_process = true;
  c.claims.network_faults = true;
  c.claims.server_restart = true;
  c.claims.session_is_connection = true;
  c.short_lease = std::chrono::milliseconds(1000);
  c.tolerance = std::chrono::milliseconds(500);
  c.malformed_uris = {{"mysql://u@127.0.0.1:99999/dlock", "port"},
                      {"mysql://u@/dlock", "host"},
                      {"mysql://u@127.0.0.1/", "database"},
                      {"mysql://u:pw@127.0.0.1/dlock?bogus=1", "bogus"},
                      {"mysql://u@127.0.0.1/dlock?table=a-b", "table"},
                      {"mysql://u@127.0.0.1/dlock?session_timeout=fast", "session_timeout"},
                      {"mysql://u@127.0.0.1/dlock?mode=named", "mode"}};
  c.closed_port_uri = [](std::uint16_t port) {
    return "mysql://dlock:pw@127.0.0.1:" + std::to_string(port) +
           "/dlock?connect_timeout=1s&command_timeout=1s";
  };
  c.make_env = [] { return std::make_unique<MysqlEnv>("", false); };
  return c;
}

// mode=lease: exclusive only, no push wake-up (waiters poll, bounded by the holder's TTL),
// liveness by lease (the session does not matter: a reset loses nothing).
BackendContext make_lease() {
  BackendContext c = make();
  c.backend = "mysql_lease";
  c.claims.read_write = false;
  c.claims.fair = false;
  c.claims.push_wakeup = false;
  c.claims.liveness = Liveness::lease;
  c.claims.session_is_connection = false;
  c.make_env = [] { return std::make_unique<MysqlEnv>("&mode=lease", true); };
  return c;
}

const Registrar registrar(&make);
const Registrar lease_registrar(&make_lease);

}  // namespace
}  // namespace dlock::conformance
