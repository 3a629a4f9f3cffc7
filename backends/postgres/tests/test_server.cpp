#include "test_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
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

int postmaster_pid() {
  const std::string data = admin("SHOW data_directory").at(0).at(0);
  std::ifstream pidfile(data + "/postmaster.pid");
  int pid = 0;
  pidfile >> pid;
  if (pid <= 0) throw std::runtime_error("no pid in " + data + "/postmaster.pid");
  return pid;
}

}  // namespace

StoppedServer::StoppedServer() {
  const int postmaster = postmaster_pid();
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

StoppedPostmaster::StoppedPostmaster() : pid_(postmaster_pid()) {
  if (::kill(pid_, SIGSTOP) != 0) throw std::runtime_error("StoppedPostmaster: kill failed (run as root or postgres)");
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (true) {  // kill() returns before the process has stopped
    const char state = parent_and_state(pid_).second;
    if (state == 'T' || state == 't') return;
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid_, SIGCONT);  // the destructor of a half-made object does not run
      throw std::runtime_error("StoppedPostmaster: the postmaster did not stop");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

StoppedPostmaster::~StoppedPostmaster() { ::kill(pid_, SIGCONT); }

Proxy::Proxy() {
  const Uri u = Uri::parse(base_uri());
  upstream_host_ = u.hosts.at(0).host;
  upstream_port_ = u.hosts.at(0).port ? u.hosts.at(0).port : 5432;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw std::runtime_error("Proxy: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

Proxy::~Proxy() {
  stop_.store(true);
  cv_.notify_all();
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  ::close(listen_fd_);
}

std::string Proxy::uri(const std::string& query) const {
  const Uri u = Uri::parse(base_uri());
  std::string out = "postgres://";
  if (!u.user.empty()) out += u.user + (u.password ? ":" + *u.password : "") + "@";
  return out + "127.0.0.1:" + std::to_string(port_) + u.path + (query.empty() ? "" : "?" + query);
}

void Proxy::delay_new(std::chrono::milliseconds d) { delay_ms_.store(d.count()); }

void Proxy::accept_loop() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int one = 1;  // as libpq and the server do: no Nagle delay (40 ms) on small writes
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    accepted_.fetch_add(1);
    const std::chrono::milliseconds delay(delay_ms_.load());
    std::lock_guard lock(mu_);
    threads_.emplace_back([this, client, delay] { serve(client, delay); });
  }
}

void Proxy::serve(int client, std::chrono::milliseconds delay) {
  if (delay.count() > 0) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, delay, [this] { return stop_.load(); });
  }
  int server = -1;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (!stop_.load() &&
      ::getaddrinfo(upstream_host_.c_str(), std::to_string(upstream_port_).c_str(), &hints, &res) == 0) {
    for (addrinfo* ai = res; ai != nullptr && server < 0; ai = ai->ai_next) {
      server = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (server >= 0 && ::connect(server, ai->ai_addr, ai->ai_addrlen) != 0) {
        ::close(server);
        server = -1;
      }
      if (server >= 0) {
        const int one = 1;
        ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
    }
    ::freeaddrinfo(res);
  }
  char buf[16384];
  while (server >= 0 && !stop_.load()) {
    pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(p, 2, 50) <= 0) continue;
    bool open = true;
    for (int i = 0; i < 2 && open; ++i) {
      if (p[i].revents == 0) continue;
      const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
      if (n <= 0) {
        open = false;
        break;
      }
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = ::write(p[1 - i].fd, buf + off, static_cast<std::size_t>(n - off));
        if (w <= 0) {
          open = false;
          break;
        }
        off += w;
      }
    }
    if (!open) break;
  }
  if (server >= 0) ::close(server);
  ::close(client);
}

}  // namespace dlock::postgres::test
