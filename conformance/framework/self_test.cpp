// Tests of the suite's own machinery, so that a green table means something: the safety
// checker catches double grants and backwards tokens, the proxy really stalls and resets,
// the taker speaks its protocol. Backend-independent (reported for every backend of a run).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "framework/safety_checker.h"
#include "framework/tcp_proxy.h"

namespace dlock::conformance {
namespace {

HoldRecord hold(std::string owner, std::uint64_t token, std::int64_t start, std::int64_t end,
                LockMode mode = LockMode::exclusive) {
  HoldRecord h;
  h.name = "n";
  h.owner = std::move(owner);
  h.token = token;
  h.start_ns = start;
  h.end_ns = end;
  h.mode = mode;
  return h;
}

TEST(SelfTest, CheckerFindsDoubleGrants) {
  SafetyChecker c;
  c.record(hold("a", 1, 0, 100));
  c.record(hold("b", 2, 50, 150));
  EXPECT_EQ(c.violations().size(), 1u);
}

TEST(SelfTest, CheckerAcceptsHandOverAfterTheLostSignal) {
  SafetyChecker c;
  const auto a = c.record(hold("a", 1, 0, 100));
  c.record(hold("b", 2, 50, 150));
  c.set_lost(a, 40);
  EXPECT_TRUE(c.violations().empty());
  SafetyChecker late;
  const auto a2 = late.record(hold("a", 1, 0, 100));
  late.record(hold("b", 2, 50, 150));
  late.set_lost(a2, 60);  // told only after b was granted: a double grant
  EXPECT_EQ(late.violations().size(), 1u);
}

TEST(SelfTest, CheckerCountsSabotageAsLoss) {
  SafetyChecker c;
  c.record(hold("a", 1, 0, 100));
  c.record(hold("b", 2, 50, 150));
  c.sabotaged("n", 30);
  EXPECT_TRUE(c.violations().empty());
}

TEST(SelfTest, CheckerCountsASabotageWhileTheAcquireWasOnItsWay) {
  // Connections reset while an acquire is on its way: the server may grant it and drop the
  // grant with the connection at once, while the caller reads "granted" after the reset.
  // Its holder cannot know before the reset either (CI once saw this as a double grant).
  SafetyChecker c;
  HoldRecord a = hold("a", 1, 20, 100);
  a.call_ns = 0;
  a.lost_ns = 70;  // told, later than b's grant
  c.record(a);
  c.record(hold("b", 2, 50, 150));
  c.sabotaged("n", 10);
  EXPECT_TRUE(c.violations().empty());
  // A grant never signalled lost came after the sabotage, from a live lock: not excused.
  SafetyChecker untold;
  a.lost_ns.reset();
  untold.record(a);
  untold.record(hold("b", 2, 50, 150));
  untold.sabotaged("n", 10);
  EXPECT_EQ(untold.violations().size(), 1u);
  // An acquire called after the sabotage is not excused by it.
  SafetyChecker d;
  HoldRecord late = hold("a", 1, 20, 100);
  late.call_ns = 15;
  late.lost_ns = 70;
  d.record(late);
  d.record(hold("b", 2, 50, 150));
  d.sabotaged("n", 10);
  EXPECT_EQ(d.violations().size(), 1u);
}

TEST(SelfTest, CheckerAllowsReadersTogetherButNotBesideAWriter) {
  SafetyChecker c;
  c.record(hold("a", 1, 0, 100, LockMode::shared));
  c.record(hold("b", 1, 10, 100, LockMode::shared));
  EXPECT_TRUE(c.violations().empty());
  c.record(hold("w", 2, 20, 30));
  EXPECT_EQ(c.violations().size(), 2u);
}

TEST(SelfTest, CheckerFindsTokensGoingBackwards) {
  SafetyChecker c;
  c.set_check_fencing(true);
  c.record(hold("a", 5, 0, 10));
  c.record(hold("b", 5, 20, 30));
  c.record(hold("c", 4, 40, 50));
  EXPECT_EQ(c.violations().size(), 2u);
  SafetyChecker ok;
  ok.set_check_fencing(true);
  ok.record(hold("a", 5, 0, 10));
  ok.record(hold("b", 9, 20, 30));
  EXPECT_TRUE(ok.violations().empty());
}

// A one-connection echo server for the proxy tests.
class Echo {
 public:
  Echo() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 8);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int c = ::accept(fd_, nullptr, nullptr);
        char buf[256];
        for (;;) {
          pollfd q{c, POLLIN, 0};
          if (stop.stop_requested()) break;
          if (::poll(&q, 1, 50) <= 0) continue;
          const auto n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          ::send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
        }
        ::close(c);
      }
    });
  }
  ~Echo() {
    thread_.request_stop();
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_;
  std::jthread thread_;
};

int connect_local(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends "ping", returns all that came back within 300 ms ("" for nothing, "!" for an error).
std::string round_trip(int fd) {
  if (::send(fd, "ping", 4, MSG_NOSIGNAL) != 4) return "!";
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buf[16];
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "!";
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

TEST(SelfTest, ProxyForwardsStallsAndResets) {
  Echo echo;
  TcpProxy proxy("127.0.0.1", echo.port());
  const int fd = connect_local(proxy.port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(round_trip(fd), "ping");
  proxy.set_mode(TcpProxy::Mode::blackhole);
  EXPECT_EQ(round_trip(fd), "") << "blackhole forwarded data";
  proxy.set_mode(TcpProxy::Mode::pass);
  EXPECT_EQ(round_trip(fd), "pingping") << "data held in the blackhole arrives once it lifts";
  proxy.reset_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(round_trip(fd), "!") << "reset_all left the connection open";
  ::close(fd);
  proxy.set_mode(TcpProxy::Mode::refuse);
  const int fd2 = connect_local(proxy.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(round_trip(fd2), "!") << "refuse mode served a connection";
  if (fd2 >= 0) ::close(fd2);
}

TEST(SelfTest, ProxyDelays) {
  Echo echo;
  TcpProxy proxy("127.0.0.1", echo.port());
  proxy.set_delay(std::chrono::milliseconds(100));
  const int fd = connect_local(proxy.port());
  ASSERT_GE(fd, 0);
  const auto start = std::chrono::steady_clock::now();
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::send(fd, "ping", 4, MSG_NOSIGNAL), 4);
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190))
      << "two forwarded chunks of 100 ms delay each";
  ::close(fd);
}

}  // namespace
}  // namespace dlock::conformance
