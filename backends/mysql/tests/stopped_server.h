// The test server's mariadbd stalled on purpose (SIGSTOP): MariaDB is one process, so every
// connection to it stops answering at once, while the sockets stay open.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace dlock::mysql::test {

// DLOCK_SERVERS_SCRIPT, or "" when unset.
std::string servers_script();

// The pid of the test server's mariadbd, from `servers.sh status mariadb`
// ("mariadb: running (pid N, port …"), or 0.
pid_t mariadbd_pid();

// Whether every thread of `pid` is in the stopped state ('T'), waiting up to `limit`.
bool all_threads_stopped(pid_t pid, std::chrono::milliseconds limit);

// SIGSTOPs `pid` and waits until every thread of it has stopped (ok() says whether it did:
// kill() returns before every thread has stopped, and one may still answer a statement).
// resume() (or the destructor, also when an assertion returned early) sends SIGCONT.
class StoppedServer {
 public:
  explicit StoppedServer(pid_t pid);
  ~StoppedServer() { resume(); }
  StoppedServer(const StoppedServer&) = delete;
  StoppedServer& operator=(const StoppedServer&) = delete;
  bool ok() const noexcept { return ok_; }
  void resume() noexcept;

 private:
  pid_t pid_;
  bool ok_ = false;
  bool resumed_ = false;
};

}  // namespace dlock::mysql::test
