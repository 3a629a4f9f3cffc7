// Integration tests of a session the client closes because a statement on it got no answer
// (its server process SIGSTOPped, command_timeout 500 ms): closing frees every lock of the
// session on the server, so nothing may still say "held" afterwards, and every hold on it
// must be told it is lost before the close is sent (before the server could grant one of
// them to someone else).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "dlock/error.h"
#include "dlock/open.h"
#include "framework/proc_net_tcp.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

using namespace std::chrono_literals;

using conformance::tcp_state;
using test::eventually;

// Statements bounded by 500 ms; S = 10 s, so no probe of the watchdog runs during a test.
std::shared_ptr<ILockProvider> open_patient(const std::string& tag, const std::string& app) {
  return dlock::open(test::uri_as("", "prefix=" + tag + ":&application_name=" + app +
                                          "&connect_timeout=500ms&command_timeout=500ms"));
}

// A provider (application_name `app`) holding two names on its one session, and that
// session's server process and ports.
struct TwoHolds {
  std::shared_ptr<ILockProvider> provider;
  std::optional<Lease> a, b;
  int pid = 0, client_port = 0, server_port = 0;
  // Whether the client's socket was still open when b's lost signal fired (-1: not fired).
  std::atomic<int> b_lost_while_open{-1};

  TwoHolds(const std::string& tag, const std::string& app) : provider(open_patient(tag, app)) {
    a = provider->try_lock("a");
    b = provider->try_lock("b");
    const auto rows = test::admin(
        "SELECT pid, client_port FROM pg_stat_activity WHERE application_name = '" + app + "'");
    if (rows.size() != 1) return;  // checked by ok()
    pid = std::stoi(rows[0][0]);
    client_port = std::stoi(rows[0][1]);
    server_port = std::stoi(test::admin("SHOW port")[0][0]);
    if (!b) return;
    b->on_lost([this] { b_lost_while_open = tcp_state(client_port, server_port) == 1 ? 1 : 0; });
  }
  bool ok() const { return a && b && pid > 0 && tcp_state(client_port, server_port) == 1; }
};

// F1: the release of `a` gets no answer. The client closes the session (the server frees
// `a` once it reads the close), so release() must not say "could not tell, the hold stays":
// afterwards the Lease is not held, and the same owner's next try_lock, while another client
// holds the lock, is busy (not a re-entry of the old hold). The session's other hold, b, is
// told it is lost before the close is sent.
TEST(PgReleaseDoubt, AReleaseWithoutAnAnswerLeavesNothingHeld) {
  const auto tag = test::fresh_tag();
  TwoHolds p(tag, tag + "-p");
  ASSERT_TRUE(p.ok()) << "two holds on one session of p";
  auto q = open_patient(tag, tag + "-q");
  std::optional<bool> released;
  std::string threw;
  {
    test::StoppedBackend stopped(p.pid);
    try {
      released = p.a->release();
    } catch (const Error& e) {
      threw = e.what();
    }
    EXPECT_EQ(threw, "") << "release() said it could not tell: the core keeps the hold";
    EXPECT_FALSE(p.a->held()) << "the session was closed, yet the Lease says held";
    EXPECT_TRUE(p.b->lost_token().stop_requested()) << "b's session was closed, yet b is not lost";
    EXPECT_EQ(p.b_lost_while_open.load(), 1) << "b's lost signal fired after the close was sent";
  }
  std::optional<Lease> got;
  ASSERT_TRUE(eventually([&] { return (got = q->try_lock("a")).has_value(); }, 3s))
      << "the closed session's lock was not freed";
  auto again = p.provider->try_lock("a");  // the same owner (this thread) as the old hold
  EXPECT_FALSE(again) << "the released hold was re-entered while q holds the lock";
  EXPECT_EQ(released, std::optional<bool>(false))
      << "the release could not tell whether its unlock ran";
}

// F3: a try on a session that holds b gets no answer: the client closes the session, and
// b's lost signal fires before the close is sent.
TEST(PgReleaseDoubt, ATryWithoutAnAnswerSignalsTheSessionsHoldsBeforeClosingIt) {
  const auto tag = test::fresh_tag();
  TwoHolds p(tag, tag + "-p");
  ASSERT_TRUE(p.ok()) << "two holds on one session of p";
  {
    test::StoppedBackend stopped(p.pid);
    EXPECT_THROW((void)p.provider->try_lock("c"), Error);
    EXPECT_TRUE(p.b->lost_token().stop_requested()) << "b's session was closed, yet b is not lost";
    EXPECT_EQ(p.b_lost_while_open.load(), 1) << "b's lost signal fired after the close was sent";
    EXPECT_FALSE(p.a->held());
  }
}

}  // namespace
}  // namespace dlock::postgres
