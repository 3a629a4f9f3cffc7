// Session backends whose server session can be expired from outside (Claims::session_expiry,
// ZooKeeper): one session carries many holds, so its end must reach every hold at once, and
// nothing the dead session held or queued may be left behind (brief SESSION_BACKENDS §4.f).
#include <atomic>
#include <thread>

#include "framework/conformance_test.h"
#include "framework/tcp_proxy.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Sessions);

namespace {
// Releases, retrying `unavailable` for a while: a session takeover or a member loss may cut
// the connection under a request, which the core reports and keeps the hold for.
bool release_retrying(TrackedLease& h) {
  for (int i = 0;; ++i) {
    try {
      return h.release();
    } catch (const Error& e) {
      if (e.code() != ErrorCode::unavailable || i == 20) throw;
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
}
}  // namespace

TEST_P(Sessions, ExpiryFiresLostOnEveryHoldAtOnceAndTheWaiterRequeues) {
  DLOCK_REQUIRE_CLAIM(session_expiry);
  auto p = open();
  const auto a = name("a"), b = name("b"), c = name("c");
  auto ha = track(*p, a, Wait::try_once());
  auto hb = track(*p, b, Wait::try_once());
  auto hc = track(*p, c, Wait::try_once(), {}, LockMode::shared);
  ASSERT_TRUE(ha && hb && hc);
  // A waiter for `a` on the same provider (another owner), queued on the same session.
  std::atomic<bool> granted{false};
  std::jthread waiter([&] {
    try {
      auto h = track(*p, a, Wait::for_duration(lease() * 5 + tol()));
      if (h) {
        granted = true;
        release_retrying(*h);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "waiter: " << e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(150));
  ASSERT_FALSE(granted.load());
  ASSERT_NO_THROW(env().expire_sessions());
  const auto expired = Clock::now();
  EXPECT_TRUE(eventually([&] { return ha->lost_ns() && hb->lost_ns() && hc->lost_ns(); },
                         milliseconds(100) + tol()))
      << "not every hold of the expired session was told";
  std::cout << "[conformance] " << ctx().backend << " three holds lost " << ms_since(expired)
            << " ms after the session expired\n";
  waiter.join();
  EXPECT_TRUE(granted.load()) << "the waiter did not queue again in a new session";
  EXPECT_FALSE(ha->release()) << "release on a dead session reported success";
  release_retrying(*hb);
  release_retrying(*hc);
  EXPECT_TRUE(eventually([&] { return env().residue().empty(); }, lease() + tol()))
      << "nodes of the expired session are left";
}

TEST_P(Sessions, ExpiryWithNothingHeldIsInvisible) {
  DLOCK_REQUIRE_CLAIM(session_expiry);
  auto p = open();
  const auto n = name();
  auto h = track(*p, n, Wait::try_once());
  ASSERT_TRUE(h);
  ASSERT_TRUE(h->release());
  ASSERT_NO_THROW(env().expire_sessions());
  // The provider opens a new session on its own.
  auto again = track(*p, n, Wait::for_duration(lease() + tol()));
  ASSERT_TRUE(again) << "the provider did not recover from its session's expiry";
  EXPECT_GT(again->token(), h->token());
  EXPECT_TRUE(again->release());
}

TEST_P(Sessions, DisconnectShorterThanTheSessionKeepsTheLocks) {
  DLOCK_REQUIRE_CLAIM(session_expiry);
  DLOCK_REQUIRE_CLAIM(network_faults);
  const auto server = env().server();
  ASSERT_TRUE(server);
  TcpProxy proxy(server->host, server->port);
  auto p = open({.via_port = proxy.port()});
  const auto n = name();
  auto h = track(*p, n, Wait::try_once());
  ASSERT_TRUE(h);
  const auto s = p->capabilities().lost_signal_bound;
  proxy.set_mode(TcpProxy::Mode::blackhole);
  std::this_thread::sleep_for(s * 3 / 10);
  proxy.set_mode(TcpProxy::Mode::pass);
  std::this_thread::sleep_for(s);  // probes run again
  EXPECT_FALSE(h->lost_ns()) << "a disconnect of 0.3 S lost the lock";
  EXPECT_TRUE(h->release());
  EXPECT_TRUE(env().residue().empty());
}

}  // namespace dlock::conformance
