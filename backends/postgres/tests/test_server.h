// The integration tests' PostgreSQL: DLOCK_TEST_POSTGRES_URI (scripts/servers.sh start
// postgres). Unset, the tests fail (never skip).
#pragma once

#include <libpq-fe.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/provider.h"

namespace dlock::postgres::test {

// Milliseconds since `t` (steady clock).
inline long long ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

// Polls `pred` every 5 ms for up to `limit`; returns whether it became true.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// The server's URI, e.g. postgres://postgres@127.0.0.1:15432/postgres. Throws if unset.
std::string base_uri();
// host:port/db of the base URI with `user[:password]@` replaced (empty: as in the base).
std::string uri_as(const std::string& userinfo, const std::string& query);

// A fresh tag "pgt-<pid>-<n>": each test's prefix and application_name.
std::string fresh_tag();

// A provider for `tag`: prefix=<tag>:, application_name=<tag>, session_timeout=1s,
// connect/command timeouts 500ms, plus `extra` ("&k=v…").
std::shared_ptr<ILockProvider> open_tagged(const std::string& tag, const std::string& extra = "");

// Runs `sql` as the base URI's user (superuser on the test server) on a new connection.
// Returns the rows as text (NULL as "<null>"). Throws std::runtime_error on failure.
std::vector<std::vector<std::string>> admin(const std::string& sql);

// Advisory locks (granted and waiting) held by sessions named `tag`.
int advisory_locks_of(const std::string& tag, bool granted);

// Terminates every session named `tag` holding an advisory lock; returns how many.
int terminate_holders(const std::string& tag);

// Restarts the server through $DLOCK_SERVERS_SCRIPT (blocks until it answers).
void restart_server();

// Crashes the server the way a power cut looks to its data: SIGKILL of one backend makes
// the postmaster kill every other process, drop shared memory (WAL not yet flushed is lost:
// asynchronous commits) and replay WAL from disk. The postmaster itself stays up (so
// pg_postmaster_start_time() does not change). Blocks until the server answers again.
void crash_server();

// Stops every process of the server (SIGSTOP of the postmaster, then of its children): it
// accepts TCP connections (the kernel's backlog) but answers nothing, as a stalled host
// does. Resumes it (SIGCONT) when destroyed. Throws std::runtime_error if it cannot.
class StoppedServer {
 public:
  StoppedServer();
  ~StoppedServer();
  StoppedServer(const StoppedServer&) = delete;
  StoppedServer& operator=(const StoppedServer&) = delete;
  // Resumes the server now (idempotent).
  void resume();

 private:
  std::vector<int> pids_;
};

// Stops only the postmaster (SIGSTOP): the running backends keep serving their sessions,
// but no new connection is served (the kernel accepts it; nobody forks its process), and
// libpq's cancel request is such a connection. Resumes it (SIGCONT) when destroyed, also
// when an assertion returns early. Throws std::runtime_error if it cannot.
class StoppedPostmaster {
 public:
  StoppedPostmaster();
  ~StoppedPostmaster();
  StoppedPostmaster(const StoppedPostmaster&) = delete;
  StoppedPostmaster& operator=(const StoppedPostmaster&) = delete;

 private:
  int pid_ = 0;
};

// Sends SIGSTOP to one server process (a backend: its session stops answering while the
// rest of the server serves on), SIGCONT when destroyed (also on an early return).
struct StoppedBackend {
  int pid;
  explicit StoppedBackend(int p) : pid(p) { ::kill(pid, SIGSTOP); }
  ~StoppedBackend() { resume(); }
  void resume() {
    if (pid > 0) ::kill(pid, SIGCONT);
    pid = 0;
  }
};

// A TCP proxy on 127.0.0.1 in front of the test server that counts the connections it
// accepts and can hold new ones back before connecting them on (a postmaster slow to fork,
// as on a loaded host): libpq's cancel request is such a new connection, to the address
// its session connected to.
class Proxy {
 public:
  Proxy();  // throws std::runtime_error if it cannot listen
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;
  // The base URI with the proxy as its host and `query` ("k=v&…") as its parameters.
  std::string uri(const std::string& query) const;
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }
  // Connections accepted from now on wait `d` before they reach the server.
  void delay_new(std::chrono::milliseconds d);

 private:
  void accept_loop();
  void serve(int client, std::chrono::milliseconds delay);

  int listen_fd_ = -1;
  int port_ = 0;
  std::string upstream_host_;
  int upstream_port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<long long> delay_ms_{0};
  std::mutex mu_;
  std::condition_variable cv_;  // wakes the delayed connections when stopping
  std::vector<std::thread> threads_;  // guarded by mu_
  std::thread acceptor_;
};

}  // namespace dlock::postgres::test
