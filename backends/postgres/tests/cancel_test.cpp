// Integration tests of cancelling a wait queued on the server (through the caller's
// stop_token): the cancel must not need a new connection (libpq's cancel request is one,
// which the postmaster forks a process for: 15–20 ms idle, hundreds under load), and where
// no pooled session can carry it, the cancel request still ends the wait.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <string>
#include <thread>

#include "dlock/open.h"
#include "framework/proc_net_tcp.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using test::eventually;
using test::ms_since;

// A provider for `tag` with statements bounded by 500 ms and S = 10 s (nothing idles out
// during a test); `extra` is appended ("&k=v…").
std::string patient_query(const std::string& tag, const std::string& extra = "") {
  return "prefix=" + tag + ":&application_name=" + tag + "&connect_timeout=500ms&command_timeout=500ms" + extra;
}

// A waiter that waits without a deadline on `name` until its stop_source is stopped, then
// records how long after the stop it returned.
struct CancelledWaiter {
  std::stop_source stop;
  std::atomic<long long> took{-1};  // ms from the stop to the return
  std::atomic<bool> got{false};
  std::atomic<Clock::time_point> stopped_at{Clock::time_point::max()};
  std::jthread thread;

  CancelledWaiter(ILockProvider& p, const std::string& name) {
    thread = std::jthread([this, &p, name] {
      AcquireOptions o;
      o.cancel = stop.get_token();
      auto l = p.try_lock(name, Wait::forever(), o);
      got = l.has_value();
      took = ms_since(stopped_at.load());
    });
  }
  ~CancelledWaiter() { cancel(); }
  void cancel() {
    if (stop.stop_requested()) return;
    stopped_at = Clock::now();
    stop.request_stop();
  }
};

// The cancel travels on an idle session the provider already has (pg_cancel_backend of the
// waiter's server process): with the postmaster stopped, so that no new connection can be
// served, the cancelled waiter still returns at once. libpq's cancel request would hang
// until command_timeout (500 ms), and the waiter's session would be closed.
TEST(PgCancel, ACancelNeedsNoNewConnection) {
  const auto tag = test::fresh_tag();
  auto p = dlock::open(test::uri_as("", patient_query(tag)));
  auto q = dlock::open(test::uri_as("", patient_query(tag)));
  auto held = p->try_lock("c");
  ASSERT_TRUE(held);
  long long took = -1;
  {
    CancelledWaiter w(*q, "c");
    ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 1; }, 2s))
        << "the waiter did not queue on the server";
    test::StoppedPostmaster stopped;
    w.cancel();
    EXPECT_TRUE(eventually([&] { return w.took >= 0; }, 2s)) << "the cancelled waiter did not return";
    took = w.took.load();
    EXPECT_FALSE(w.got.load());
  }
  std::cout << "[postgres] a waiter cancelled while the postmaster was stopped returned after " << took << " ms\n";
  EXPECT_GE(took, 0);
  EXPECT_LT(took, 100) << "the cancel waited for a new connection";
  EXPECT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 0; }, 2s))
      << "the cancelled wait stayed queued";
  EXPECT_EQ(test::advisory_locks_of(tag, /*granted=*/true), 1) << "only the holder's lock";
  EXPECT_TRUE(held->release());
  auto again = q->try_lock("c", Wait::for_duration(2s));
  EXPECT_TRUE(again) << "the name stayed held";
}

// With every session of the provider dedicated to a wait (pool=2, two waiters), no session
// can carry the cancel: libpq's cancel request (a new connection, counted by the proxy)
// ends the wait. The session that wait gave back then carries the other waiter's cancel,
// with no new connection. Nothing stays queued or held.
TEST(PgCancel, WithNoIdleSessionTheCancelRequestEndsTheWait) {
  const auto tag = test::fresh_tag();
  test::Proxy proxy;
  auto p = dlock::open(test::uri_as("", patient_query(tag)));
  auto q = dlock::open(proxy.uri(patient_query(tag, "&pool=2")));
  auto held_a = p->try_lock("a");
  auto held_b = p->try_lock("b");
  ASSERT_TRUE(held_a);
  ASSERT_TRUE(held_b);
  CancelledWaiter wa(*q, "a");
  ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 1; }, 2s));
  CancelledWaiter wb(*q, "b");
  ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 2; }, 2s));
  ASSERT_EQ(test::admin("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + tag + "'")[0][0], "3")
      << "the holder's session and the two waiters' (pool=2)";
  int before = proxy.accepted();
  wb.cancel();
  ASSERT_TRUE(eventually([&] { return wb.took >= 0; }, 2s)) << "the cancelled waiter did not return";
  EXPECT_FALSE(wb.got.load());
  EXPECT_LT(wb.took.load(), 400) << "the cancel request did not end the wait";
  EXPECT_EQ(proxy.accepted() - before, 1) << "one cancel request";
  ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 1; }, 2s))
      << "the cancelled wait stayed queued";
  before = proxy.accepted();
  wa.cancel();
  ASSERT_TRUE(eventually([&] { return wa.took >= 0; }, 2s)) << "the cancelled waiter did not return";
  EXPECT_FALSE(wa.got.load());
  EXPECT_LT(wa.took.load(), 400);
  EXPECT_EQ(proxy.accepted() - before, 0) << "an idle session was there, yet the cancel opened a connection";
  EXPECT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 0; }, 2s))
      << "a cancelled wait stayed queued";
  EXPECT_EQ(test::advisory_locks_of(tag, /*granted=*/true), 2) << "only the holder's locks";
  EXPECT_TRUE(held_a->release());
  EXPECT_TRUE(held_b->release());
}

// Stops `waiter_pid` (q's server process for waits; `client_port`: its connection's client
// side), starts a wait on `name` through `q` and cancels it while the wait statement sits
// unread in the stopped process's socket; resumes the process 100 ms later. The cancel must
// end the wait soon after the resume (not at command_timeout, 500 ms), without closing the
// session, and leave nothing queued for `q_app`. `how`: how the cancel travels, for the log.
void expect_a_cancel_before_the_wait_started_not_lost(ILockProvider& q, const std::string& q_app,
                                                      const std::string& name, int waiter_pid,
                                                      int client_port, const std::string& how) {
  const int server_port = std::stoi(test::admin("SHOW port")[0][0]);
  ASSERT_EQ(conformance::rx_queue(server_port, client_port), 0) << "the waiter session's server socket (/proc/net/tcp)";
  test::StoppedBackend stopped(waiter_pid);
  CancelledWaiter w(q, name);
  ASSERT_TRUE(eventually([&] { return conformance::rx_queue(server_port, client_port) > 0; }, 2s))
      << "the wait statement was not sent";
  w.cancel();
  std::this_thread::sleep_for(100ms);  // the cancel is on its way while the server process is stopped
  stopped.resume();
  ASSERT_TRUE(eventually([&] { return w.took >= 0; }, 2s)) << "the cancelled waiter did not return";
  EXPECT_FALSE(w.got.load());
  std::cout << "[postgres] a waiter cancelled " << how << " before its wait reached the server returned "
            << w.took.load() << " ms after the cancel (the server process resumed 100 ms after it)\n";
  EXPECT_LT(w.took.load(), 100 + 150) << "the cancel was lost: the wait ran on until command_timeout";
  EXPECT_EQ(test::admin("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(waiter_pid))[0][0], "1")
      << "the waiter's session was closed (its cancel was not taken)";
  EXPECT_TRUE(eventually([&] { return test::advisory_locks_of(q_app, /*granted=*/false) == 0; }, 2s))
      << "the cancelled wait stayed queued";
}

// PostgreSQL drops a cancel that reaches a backend between statements. A cancel asked for
// right after the wait statement was sent, before the server process has read it (here: it
// is stopped, and the statement sits in its socket), must still end the wait once it runs,
// not be lost so that the wait runs on until command_timeout and its session is closed.
TEST(PgCancel, ACancelBeforeTheWaitStartedOnTheServerIsNotLost) {
  const auto tag = test::fresh_tag();
  const std::string q_app = tag + "-q";
  auto p = dlock::open(test::uri_as("", patient_query(tag)));
  auto q = dlock::open(test::uri_as("", "prefix=" + tag + ":&application_name=" + q_app +
                                            "&connect_timeout=500ms&command_timeout=500ms"));
  auto held = p->try_lock("c");
  ASSERT_TRUE(held);
  auto x = q->try_lock("x");  // keeps q's first session from carrying a wait
  ASSERT_TRUE(x);
  {  // a first wait: q claims "c" (later waits queue at once) and opens a session for waits
    CancelledWaiter w(*q, "c");
    ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(q_app, /*granted=*/false) == 1; }, 2s));
  }
  ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(q_app, /*granted=*/false) == 0; }, 2s));
  // q's session without a hold: the next wait's.
  const auto rows = test::admin(
      "SELECT pid, client_port FROM pg_stat_activity a WHERE application_name = '" + q_app +
      "' AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory')");
  ASSERT_EQ(rows.size(), 1u) << "q's sessions: one holding x, one for waits";
  expect_a_cancel_before_the_wait_started_not_lost(*q, q_app, "c", std::stoi(rows[0][0]), std::stoi(rows[0][1]),
                                                   "through a pooled session");
  EXPECT_TRUE(x->release());
  EXPECT_TRUE(held->release());
}

// The same race on the cancel request's path (the wait took q's only session: no session
// can carry pg_cancel_backend). The request reaches the server process while it is stopped
// between statements, so the server drops it once the process resumes: it must be sent
// again until the wait answers, not be lost so that the wait runs on until command_timeout
// and its session is closed (review pg, F2: 4 of 975 rounds under load).
TEST(PgCancel, ACancelRequestBeforeTheWaitStartedOnTheServerIsNotLost) {
  const auto tag = test::fresh_tag();
  const std::string q_app = tag + "-q";
  auto p = dlock::open(test::uri_as("", patient_query(tag)));
  auto q = dlock::open(test::uri_as("", "prefix=" + tag + ":&application_name=" + q_app +
                                            "&connect_timeout=500ms&command_timeout=500ms"));
  auto held = p->try_lock("c");
  ASSERT_TRUE(held);
  // q claims c's key, so its wait queues at once on its only session (none is left idle).
  ASSERT_FALSE(q->try_lock("c"));
  const auto rows = test::admin(
      "SELECT pid, client_port FROM pg_stat_activity WHERE application_name = '" + q_app + "'");
  ASSERT_EQ(rows.size(), 1u) << "q's one session";
  expect_a_cancel_before_the_wait_started_not_lost(*q, q_app, "c", std::stoi(rows[0][0]), std::stoi(rows[0][1]),
                                                   "by a cancel request");
  EXPECT_TRUE(held->release());
}

}  // namespace
}  // namespace dlock::postgres
