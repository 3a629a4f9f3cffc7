#include "test_server.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

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

namespace {

// The parent pid and state letter of `pid` (from /proc/<pid>/stat); {0, 0} if it is gone.
std::pair<int, char> parent_and_state(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  if (paren == std::string::npos || paren + 4 >= line.size()) return {0, 0};
  return {std::atoi(line.c_str() + paren + 4), line[paren + 2]};
}

std::vector<int> children_of(int parent) {
  std::vector<int> out;
  if (DIR* dir = ::opendir("/proc")) {
    while (dirent* e = ::readdir(dir)) {
      const int pid = std::atoi(e->d_name);
      if (pid > 0 && parent_and_state(pid).first == parent) out.push_back(pid);
    }
    ::closedir(dir);
  }
  return out;
}

}  // namespace

StoppedServer::StoppedServer() {
  const std::string data = admin("SHOW data_directory").at(0).at(0);
  std::ifstream pidfile(data + "/postmaster.pid");
  int postmaster = 0;
  pidfile >> postmaster;
  if (postmaster <= 0) throw std::runtime_error("StoppedServer: no pid in " + data + "/postmaster.pid");
  // The postmaster first, so it forks no process we would miss.
  if (::kill(postmaster, SIGSTOP) != 0) throw std::runtime_error("StoppedServer: kill failed (run as root or postgres)");
  pids_.push_back(postmaster);
  for (int child : children_of(postmaster)) {
    if (::kill(child, SIGSTOP) == 0) pids_.push_back(child);
  }
  // kill() returns before a process has stopped: one may still answer a statement.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int pid : pids_) {
    while (true) {
      const char state = parent_and_state(pid).second;
      // Stopped, gone, or a zombie (a backend that just exited, e.g. the admin() connection
      // above: the stopped postmaster cannot reap it, and it runs no more).
      if (state == 'T' || state == 't' || state == 'Z' || state == 'X' || state == 0) break;
      if (std::chrono::steady_clock::now() > end) {
        resume();  // the destructor of a half-made object does not run
        throw std::runtime_error("StoppedServer: a process did not stop");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

StoppedServer::~StoppedServer() { resume(); }

void StoppedServer::resume() {
  for (int pid : pids_) ::kill(pid, SIGCONT);
  pids_.clear();
}

}  // namespace dlock::postgres::test
