// The integration tests' server: DLOCK_TEST_ZOOKEEPER_URI (scripts/servers.sh start zookeeper),
// a fresh prefix per test, and a raw synchronous C-client handle to look at the tree.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dlock::zookeeper::test {

struct HandleCloser {
  void operator()(zhandle_t* zh) const { zookeeper_close(zh); }
};
using Handle = std::unique_ptr<zhandle_t, HandleCloser>;

// "127.0.0.1:port" of the test server; fails the test (throws) when the variable is unset.
std::string hosts();
// A prefix unique to this process and call ("zkt-<pid>-<random>-<n>"), also across runs.
std::string fresh_prefix();
// zk://<hosts>/?prefix=<prefix>&session_timeout=1s&… plus `extra` ("&k=v…").
std::string uri_for(const std::string& prefix, const std::string& extra = "");
// A connected raw handle (digest credentials "user:pw" if given).
Handle raw(const std::string& digest = "");
// The session timeout the test server grants when asked for `asked_ms` (it clamps it to
// its [min,max]SessionTimeout).
int granted_timeout_ms(int asked_ms);
// The children of `path` (empty if it does not exist).
std::vector<std::string> children(zhandle_t* zh, const std::string& path);
// Every lock node under /<prefix>/*/.
std::vector<std::string> lock_nodes(zhandle_t* zh, const std::string& prefix);
// The port of the test server (from hosts()).
std::uint16_t port();
// The server's answer to a four-letter word (e.g. "wchs"); throws if it cannot ask.
std::string four_letter(const std::string& word);
// The same, asked of the server listening on 127.0.0.1:`port`.
std::string four_letter(const std::string& word, std::uint16_t port);
// "Total watches:N" of the server's `wchs`: every watch of every session, server-wide.
long total_watches();
// A counter of the server's `mntr` (e.g. "zk_packets_received"); throws if it is missing.
long mntr_value(const std::string& key);

// The pid of the test server's JVM, as scripts/servers.sh recorded it
// (${DLOCK_SERVERS_DIR:-/tmp/dlock-servers}/zookeeper/pid); throws unless that server's
// recorded port is port() (never another server's process).
pid_t server_pid();

// Freezes a process (SIGSTOP) for its lifetime; always lets it go on again (SIGCONT), also
// when the test fails.
class Frozen {
 public:
  explicit Frozen(pid_t pid);
  ~Frozen() { thaw(); }
  void thaw() noexcept {
    if (pid_ != 0) ::kill(pid_, SIGCONT);
    pid_ = 0;
  }
  Frozen(const Frozen&) = delete;
  Frozen& operator=(const Frozen&) = delete;

 private:
  pid_t pid_;
};

// Waits until `pred` holds or `limit` passes; returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace dlock::zookeeper::test
