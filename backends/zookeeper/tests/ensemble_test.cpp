// Against the 3-member ensemble (DLOCK_TEST_ZOOKEEPER3_URI, scripts/servers.sh start
// zookeeper3; labels zookeeper;integration, RUN_SERIAL: it freezes the leader).
//
// Only the leader expires sessions, and it hears of a session only through what the
// followers forward to it. A follower that lost the leader still answers reads (for
// syncLimit × tickTime, 2.5 s with servers.sh), so an answered read proves nothing about
// when the leader may expire the session: the lost signal must still fire within S.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "test_server.h"

namespace dlock::zookeeper::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::vector<std::uint16_t> ensemble_ports() {
  const char* v = std::getenv("DLOCK_TEST_ZOOKEEPER3_URI");
  if (v == nullptr || *v == '\0') throw std::runtime_error("DLOCK_TEST_ZOOKEEPER3_URI not set");
  std::string s = v;
  if (s.rfind("zk://", 0) == 0) s = s.substr(5);
  s = s.substr(0, s.find('/'));
  std::vector<std::uint16_t> ports;
  std::stringstream in(s);
  for (std::string host; std::getline(in, host, ',');) {
    ports.push_back(static_cast<std::uint16_t>(std::stoi(host.substr(host.rfind(':') + 1))));
  }
  return ports;
}

// "leader", "follower", or "" (not serving).
std::string mode_of(std::uint16_t port) {
  try {
    const auto s = four_letter("srvr", port);
    const auto at = s.find("Mode: ");
    if (at == std::string::npos) return "";
    return s.substr(at + 6, s.find('\n', at) - at - 6);
  } catch (const std::exception&) {
    return "";
  }
}

bool all_serving(const std::vector<std::uint16_t>& ports) {
  for (auto p : ports) {
    const auto m = mode_of(p);
    if (m != "leader" && m != "follower") return false;
  }
  return true;
}

// The process listening on `port` (its socket's inode, then whose fd it is). A JVM listens
// on an IPv4-mapped IPv6 socket: /proc/net/tcp6.
pid_t listener_pid(std::uint16_t port) {
  std::string inode;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream tcp(table);
    std::string line;
    std::getline(tcp, line);  // header
    while (inode.empty() && std::getline(tcp, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, ino;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> ino;
      if (state != "0A") continue;  // LISTEN
      if (std::stoul(local.substr(local.rfind(':') + 1), nullptr, 16) == port) inode = ino;
    }
  }
  if (inode.empty()) throw std::runtime_error("nothing listens on port " + std::to_string(port));
  const std::string target = "socket:[" + inode + "]";
  DIR* proc = opendir("/proc");
  if (proc == nullptr) throw std::runtime_error("cannot read /proc");
  pid_t found = 0;
  while (dirent* e = readdir(proc)) {
    const std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string fds = "/proc/" + pid + "/fd";
    DIR* d = opendir(fds.c_str());
    if (d == nullptr) continue;
    while (dirent* fd = readdir(d)) {
      char buf[64];
      const auto n = readlink((fds + "/" + fd->d_name).c_str(), buf, sizeof buf - 1);
      if (n > 0 && std::string(buf, static_cast<std::size_t>(n)) == target) found = std::stoi(pid);
    }
    closedir(d);
    if (found != 0) break;
  }
  closedir(proc);
  if (found == 0) throw std::runtime_error("no process of ours holds the listener on port " + std::to_string(port));
  return found;
}

TEST(ZkEnsemble, AFollowerCutFromTheLeaderDoesNotKeepTheHoldAlive) {
  const auto ports = ensemble_ports();
  ASSERT_EQ(ports.size(), 3u);
  ASSERT_TRUE(eventually([&] { return all_serving(ports); }, 30s)) << "the ensemble does not serve";
  std::optional<std::uint16_t> leader, follower;
  for (auto p : ports) {
    const auto m = mode_of(p);
    if (m == "leader") leader = p;
    if (m == "follower" && !follower) follower = p;
  }
  ASSERT_TRUE(leader && follower);
  const pid_t leader_pid = listener_pid(*leader);

  // Connected to one follower only: the client cannot move to another member.
  auto p = dlock::open("zk://127.0.0.1:" + std::to_string(*follower) + "/?prefix=" + fresh_prefix() +
                       "&session_timeout=1s&connect_timeout=2s&command_timeout=500ms");
  const auto s = p->capabilities().lost_signal_bound;  // S, as the server granted it
  ASSERT_LE(s, 2000ms) << "the ensemble grants a longer session than this test is meant for";
  auto l = p->try_lock("n");
  ASSERT_TRUE(l);
  std::this_thread::sleep_for(s);  // a few probes answered: the steady state of a hold

  Clock::duration took{};
  bool fired = false;
  {
    // The leader frozen: the follower cannot reach it but goes on answering reads until it
    // gives up on it (syncLimit × tickTime); from the cut on, no touch of our session can
    // reach the leader, which may expire it at (its last touch) + S.
    Frozen frozen(leader_pid);
    const auto cut = Clock::now();
    fired = eventually([&] { return l->lost_token().stop_requested(); }, s + 3s);
    took = Clock::now() - cut;
  }
  // Back to a serving ensemble for whatever runs next (the old leader rejoins).
  const bool healed = eventually([&] { return all_serving(ports); }, 60s);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  RecordProperty("lost_signal_after_cut_ms", std::to_string(fired ? ms : -1));
  RecordProperty("session_timeout_ms", std::to_string(s.count()));
  EXPECT_TRUE(fired) << "no lost signal " << ms << " ms after the cut (S = " << s.count() << " ms)";
  // Margin: the core's 50 ms plus scheduling on a loaded machine.
  if (fired) {
    EXPECT_LE(took, s + 100ms) << "the lost signal fired " << ms << " ms after the cut, S = " << s.count() << " ms";
  }
  EXPECT_TRUE(healed) << "the ensemble did not serve again within 60 s";
}

}  // namespace
}  // namespace dlock::zookeeper::test
