// The mysql:// floor and its extra rows: what MariaDB costs without dlock, done by hand with
// Connector/C++ in the same run.
//  - floor PING: DO 1 (1 RT);
//  - floor lock: prepared SELECT NEXTVAL(seq) … FOR UPDATE NOWAIT + ROLLBACK (2 RT): dlock's
//    row mode does exactly this work, so its target is p50 <= 1.10 x this;
//  - extra rows (run_mysql_native): the GET_LOCK/RELEASE_LOCK pair, and a native blocking
//    GET_LOCK hand-off among 4 contenders (the floor for dlock's contended hand-off);
//  - peers: tooz's mysql driver and a plain MySQLdb GET_LOCK client (/usr/bin/python3).
#include <cppconn/driver.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "clock.h"
#include "floor.h"
#include "loop.h"
#include "report.h"
#include "sections.h"
#include "stats.h"

namespace dlock_bench {

namespace {

struct MysqlFloorState {
  std::unique_ptr<sql::Connection> conn;
  std::unique_ptr<sql::Statement> stmt;
  std::unique_ptr<sql::PreparedStatement> lock;
  std::unique_ptr<sql::PreparedStatement> rollback;
};

std::unique_ptr<sql::Connection> connect(const dlock::Uri& uri) {
  static std::mutex mu;  // get_mysql_driver_instance() is not thread-safe
  sql::mysql::MySQL_Driver* driver = nullptr;
  {
    std::lock_guard lock(mu);
    driver = sql::mysql::get_mysql_driver_instance();
  }
  sql::ConnectOptionsMap o;
  if (uri.scheme == "mysql+unix") {
    o["hostName"] = sql::SQLString("localhost");
    o["socket"] = sql::SQLString(uri.path);
  } else {
    o["hostName"] = sql::SQLString(uri.hosts.at(0).host);
    o["port"] = static_cast<int>(uri.hosts.at(0).port ? uri.hosts.at(0).port : 3306);
  }
  o["userName"] = sql::SQLString(uri.user);
  o["password"] = sql::SQLString(uri.password.value_or(""));
  std::string db = uri.path.size() > 1 ? uri.path.substr(1) : "";
  for (const auto& [k, v] : uri.params) {
    if (k == "db") db = v;
  }
  o["schema"] = sql::SQLString(db);
  o["OPT_RECONNECT"] = false;
  o["OPT_READ_TIMEOUT"] = 30;
  return std::unique_ptr<sql::Connection>(driver->connect(o));
}

std::string table_of(const dlock::Uri& uri) {
  for (const auto& [k, v] : uri.params) {
    if (k == "table") return v;
  }
  return "dlock_lock";
}

}  // namespace

Floor make_mysql_floor(const dlock::Uri& uri) {
  auto st = std::make_shared<MysqlFloorState>();
  st->conn = connect(uri);
  st->stmt.reset(st->conn->createStatement());
  st->stmt->execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  st->conn->setAutoCommit(false);
  Floor f;
  f.state = st;
  f.wire = true;
  f.ping_label = "raw Connector/C++ DO 1 (1 RT)";
  f.ping = [s = st.get()] { s->stmt->execute("DO 1"); };
  for (const auto& [k, v] : uri.params) {
    if (k == "mode" && v == "lease") return f;  // the lease table has no sequence: PING only
  }
  const std::string table = table_of(uri);  // the provider opened first: table and sequence exist
  st->stmt->execute("INSERT IGNORE INTO `" + table + "` (k, name) VALUES (UNHEX(SHA2('dlock-bench-floor', 256)), "
                    "'dlock-bench-floor')");
  st->conn->commit();
  st->lock.reset(st->conn->prepareStatement("SELECT NEXTVAL(`" + table + "_seq`) FROM `" + table +
                                            "` WHERE k = UNHEX(SHA2(?, 256)) FOR UPDATE NOWAIT"));
  st->lock->setString(1, "dlock-bench-floor");
  st->rollback.reset(st->conn->prepareStatement("ROLLBACK"));
  f.lock_label = "raw prepared SELECT NEXTVAL … FOR UPDATE NOWAIT + ROLLBACK (2 RT)";
  f.lock = [s = st.get()] {
    std::unique_ptr<sql::ResultSet> rs(s->lock->executeQuery());
    if (!rs->next()) throw std::runtime_error("mysql floor: the floor row is missing");
    s->rollback->execute();
  };
  return f;
}

void run_mysql_native(const dlock::Uri& uri, const Settings& settings, Report& report) {
  // The GET_LOCK/RELEASE_LOCK pair (2 RT), as DistributedLock and tooz use it.
  {
    auto c = connect(uri);
    std::unique_ptr<sql::Statement> s(c->createStatement());
    const std::string name = bench_name("get-lock");
    auto op = [&] {
      std::unique_ptr<sql::ResultSet> a(s->executeQuery("SELECT GET_LOCK('" + name + "', 0)"));
      std::unique_ptr<sql::ResultSet> b(s->executeQuery("SELECT RELEASE_LOCK('" + name + "')"));
    };
    Samples t = time_loop(settings.warmup, settings.iterations, settings.loop_cap, op);
    Row r;
    r.section = "a";
    r.what = "raw GET_LOCK(name, 0) + RELEASE_LOCK (2 RT)";
    r.p50_us = t.p50_us();
    r.p99_us = t.p99_us();
    r.metrics = {{"p50_us", *r.p50_us}, {"p99_us", *r.p99_us}};
    report.add(std::move(r));
  }
}

}  // namespace dlock_bench

namespace dlock_bench {

namespace {

// Runs a peer script with /usr/bin/python3 (Debian's, which sees python3-tooz and
// python3-mysqldb); the password goes through the environment, never the command line.
void python_peer(const dlock::Uri& uri, const std::string& kind, const std::string& label,
                 const Settings& settings, Report& report) {
  const char* python = "/usr/bin/python3";
  if (::access(python, X_OK) != 0) {
    report.add_note("peer " + label + ": /usr/bin/python3 not found");
    return;
  }
  std::string db = uri.path.size() > 1 ? uri.path.substr(1) : "";
  ::setenv("DLOCK_BENCH_MYSQL_PASSWORD", uri.password.value_or("").c_str(), 1);
  const std::string host = uri.hosts.empty() ? "127.0.0.1" : uri.hosts[0].host;
  const std::string port = std::to_string(uri.hosts.empty() || uri.hosts[0].port == 0 ? 3306 : uri.hosts[0].port);
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = std::string(python) + " " + quote(std::string(DLOCK_BENCH_PEERS_DIR) + "/mysql_peers.py") +
                          " " + kind + " " + quote(host) + " " + port + " " + quote(db) + " " + quote(uri.user) +
                          " " + std::to_string(std::min(settings.iterations, 5000)) + " " +
                          std::to_string(settings.warmup) + " " + quote(bench_name("peer-" + kind));
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run the " + label + " peer");
  std::map<std::string, std::string> kv;
  char line[512];
  while (std::fgets(line, sizeof line, p) != nullptr) {
    std::string l(line);
    if (!l.empty() && l.back() == '\n') l.pop_back();
    const auto sp = l.find(' ');
    if (sp != std::string::npos) kv[l.substr(0, sp)] = l.substr(sp + 1);
  }
  ::pclose(p);
  if (kv.count("error")) {
    report.add_note("peer " + label + ": " + kv["error"]);
    return;
  }
  if (!kv.count("p50_us") || !kv.count("p99_us")) throw std::runtime_error(label + " peer gave no figures");
  Row r;
  r.section = "a";
  r.what = "peer: " + label + " " + kv["version"] + " acquire + release";
  r.p50_us = std::stod(kv["p50_us"]);
  r.p99_us = std::stod(kv["p99_us"]);
  r.other = kv["iterations"] + " iterations";
  r.metrics = {{"p50_us", *r.p50_us}, {"p99_us", *r.p99_us}};
  report.add(std::move(r));
}

}  // namespace

void run_mysql_handoff_floor(const dlock::Uri& uri, const Settings& settings, Report& report) {
  // Native blocking hand-off: the same number of contenders as dlock's, each on its own
  // connection, GET_LOCK(name, 10) then RELEASE_LOCK at once, for the contended duration.
  // Threads of this process (cheaper to switch between than dlock's processes: the floor is
  // not flattered).
  const int workers = settings.workers;
  const std::string name = bench_name("get-lock-handoff");
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> handoffs{0};
  std::vector<std::unique_ptr<sql::Connection>> conns;
  for (int i = 0; i < workers; ++i) conns.push_back(connect(uri));
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<sql::Statement> s(conns[static_cast<std::size_t>(i)]->createStatement());
      while (!stop.load()) {
        std::unique_ptr<sql::ResultSet> a(s->executeQuery("SELECT GET_LOCK('" + name + "', 10)"));
        handoffs.fetch_add(1);
        std::unique_ptr<sql::ResultSet> b(s->executeQuery("SELECT RELEASE_LOCK('" + name + "')"));
      }
    });
  }
  const std::uint64_t t0 = mono_ns();
  std::this_thread::sleep_for(settings.contended);
  stop = true;
  for (auto& t : threads) t.join();
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  const double native = static_cast<double>(handoffs.load()) / secs;
  add_native_handoff_rows(report,
                          "floor: native blocking GET_LOCK hand-off, " + std::to_string(workers) +
                              " contenders (threads, own connections)",
                          native, 0.6);
}

void run_mysql_peers(const dlock::Uri& uri, const Settings& settings, Report& report) {
  run_mysql_native(uri, settings, report);
  python_peer(uri, "tooz", "tooz (mysql driver)", settings, report);
  python_peer(uri, "mysqldb", "MySQLdb GET_LOCK", settings, report);
  add_speedup_row(report, "peer: tooz", "tooz", 5);
}

}  // namespace dlock_bench
