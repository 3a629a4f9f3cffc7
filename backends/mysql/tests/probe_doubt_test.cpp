// Integration tests of a row-mode probe that gets no answer (mariadbd SIGSTOPped,
// command_timeout 1 s, S = 3 s: a probe every second). Giving it up closes or shuts down the
// hold's socket, and a server that reads the FIN rolls back and may grant a waiter at once:
// the hold's lost signal must fire while the socket is still open.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "framework/proc_net_tcp.h"
#include "stalled_server_test.h"

namespace dlock::mysql::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using conformance::tcp_state;

class MysqlProbeDoubtTest : public StalledServerTest {
 protected:
  static constexpr const char* kParams =
      "connect_timeout=1s&command_timeout=1s&session_timeout=3s";

  void SetUp() override {
    StalledServerTest::SetUp();
    if (HasFatalFailure()) return;
    server_port_ = std::stoi(db_->query("SELECT @@port").at(0));
  }

  // The client port of the one connection holding a row of this database.
  int holder_port() const {
    const auto ids = db_->lock_transactions(false);
    if (ids.size() != 1) return 0;
    const auto host =
        db_->query("SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = " + ids[0]);
    if (host.size() != 1 || host[0].rfind(':') == std::string::npos) return 0;
    return std::stoi(host[0].substr(host[0].rfind(':') + 1));
  }

  // Stalls the server until `lease`'s probe is given up; returns the TCP state of the hold's
  // socket when its lost signal fired (-1: it never fired within 6 s).
  int state_when_lost(Lease& lease) {
    const int port = holder_port();
    EXPECT_NE(port, 0) << "the holder's connection was not found";
    std::atomic<int> state{-1};
    lease.on_lost([&] { state = tcp_state(port, server_port_); });
    EXPECT_EQ(tcp_state(port, server_port_), 1) << "the hold's socket is not established";
    StoppedServer stopped(mariadbd_pid());
    EXPECT_TRUE(stopped.ok()) << "mariadbd did not stop";
    EXPECT_TRUE(within(6s, [&] { return state.load() != -1; })) << "no lost signal";
    stopped.resume();
    return state.load();
  }

  int server_port_ = 0;
};

// M4 (review my), a hold granted by a try (short connection): the probe's read timed out
// and Connector/C closed the socket before the catch marked the hold lost.
TEST_F(MysqlProbeDoubtTest, ATryHoldIsLostBeforeItsSocketCloses) {
  auto p = dlock::open(db_->uri(kParams));
  auto a = p->try_lock("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(state_when_lost(*a), 1)
      << "the lost signal fired after the socket was closed (state 4/5: FIN_WAIT)";
  EXPECT_FALSE(a->held());
}

// M4 (review my), a hold granted by a wait (waiter connection, no read timeout): the probe's
// deadline shut the socket down, the probe answered `failed`, and the hold was marked lost
// only when the hang-up monitor saw the shutdown.
TEST_F(MysqlProbeDoubtTest, AWaitHoldIsLostBeforeItsSocketIsShutDown) {
  auto p = dlock::open(db_->uri(kParams));
  auto q = dlock::open(db_->uri(kParams));
  auto held_by_q = q->try_lock("b");
  ASSERT_TRUE(held_by_q);
  std::optional<Lease> b;
  std::thread waiter([&] { b = p->try_lock("b", Wait::for_duration(10s)); });
  const bool queued = within(5s, [&] { return db_->lock_transactions(true).size() == 2; });
  EXPECT_TRUE(queued) << "p's wait never reached the server";
  EXPECT_TRUE(held_by_q->release());
  waiter.join();
  ASSERT_TRUE(queued);
  ASSERT_TRUE(b) << "p's wait was not granted";
  EXPECT_EQ(state_when_lost(*b), 1)
      << "the lost signal fired after the socket was shut down (state 4/5: FIN_WAIT)";
  EXPECT_FALSE(b->held());
}

}  // namespace
}  // namespace dlock::mysql::test
