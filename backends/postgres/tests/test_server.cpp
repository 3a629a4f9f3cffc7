#include "test_server.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include "dlock/open.h"
#include "dlock/uri.h"

namespace dlock::postgres::test {

std::string base_uri() {
  const char* v = std::getenv("DLOCK_TEST_POSTGRES_URI");
  if (v == nullptr || *v == '\0') throw std::runtime_error("DLOCK_TEST_POSTGRES_URI not set");
  return v;
}

std::string uri_as(const std::string& userinfo, const std::string& query) {
  const Uri u = Uri::parse(base_uri());
  std::string out = "postgres://";
  if (!userinfo.empty()) {
    out += userinfo + "@";
  } else if (!u.user.empty()) {
    out += u.user + (u.password ? ":" + *u.password : "") + "@";
  }
  out += u.hosts.at(0).host + ":" + std::to_string(u.hosts.at(0).port ? u.hosts.at(0).port : 5432);
  out += u.path;
  if (!query.empty()) out += "?" + query;
  return out;
}

std::string fresh_tag() {
  static std::atomic<int> n{0};
  return "pgt-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

std::shared_ptr<ILockProvider> open_tagged(const std::string& tag, const std::string& extra) {
  return dlock::open(uri_as("", "prefix=" + tag + ":&application_name=" + tag +
                                    "&session_timeout=1s&connect_timeout=500ms&command_timeout=500ms" +
                                    extra));
}

std::vector<std::vector<std::string>> admin(const std::string& sql) {
  PGconn* c = PQconnectdb(base_uri().c_str());
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn(c, PQfinish);
  if (PQstatus(c) != CONNECTION_OK) throw std::runtime_error(std::string("admin connect: ") + PQerrorMessage(c));
  PGresult* r = PQexec(c, sql.c_str());
  std::unique_ptr<PGresult, void (*)(PGresult*)> res(r, PQclear);
  const auto st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    throw std::runtime_error("admin: " + sql + ": " + PQerrorMessage(c));
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < PQntuples(r); ++i) {
    rows.emplace_back();
    for (int j = 0; j < PQnfields(r); ++j) {
      rows.back().push_back(PQgetisnull(r, i, j) ? "<null>" : PQgetvalue(r, i, j));
    }
  }
  return rows;
}

int advisory_locks_of(const std::string& tag, bool granted) {
  auto rows = admin(
      "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE "
      "l.locktype = 'advisory' AND l.granted = " + std::string(granted ? "true" : "false") +
      " AND a.application_name = '" + tag + "'");
  return std::stoi(rows.at(0).at(0));
}

int terminate_holders(const std::string& tag) {
  auto rows = admin(
      "SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a WHERE a.application_name = '" +
      tag + "' AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)");
  return std::stoi(rows.at(0).at(0));
}

void restart_server() {
  const char* script = std::getenv("DLOCK_SERVERS_SCRIPT");
  if (script == nullptr || *script == '\0') throw std::runtime_error("DLOCK_SERVERS_SCRIPT not set");
  const std::string cmd = std::string("timeout 60 '") + script + "' restart postgres >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("restart postgres failed");
}

void crash_server() {
  PGconn* c = PQconnectdb(base_uri().c_str());
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn(c, PQfinish);
  if (PQstatus(c) != CONNECTION_OK) throw std::runtime_error("crash_server: connect failed");
  const int pid = PQbackendPID(c);
  if (::kill(pid, SIGKILL) != 0) throw std::runtime_error("crash_server: kill failed (run as root or postgres)");
  conn.reset();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the postmaster notices first
  while (true) {
    try {
      (void)admin("SELECT 1");
      return;
    } catch (const std::runtime_error&) {
      if (std::chrono::steady_clock::now() > end) throw std::runtime_error("crash_server: no recovery within 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace dlock::postgres::test
