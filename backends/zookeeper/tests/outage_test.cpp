// A server outage under a held and an awaited lock (labels zookeeper;integration,
// RUN_SERIAL: it freezes the test server, by the pid scripts/servers.sh recorded).
//
// The sessions survive an outage shorter than S; the waiter whose turn comes right after it
// must get a hold that lives: not one whose expiry estimate still counts from before the
// outage, so that its lost signal fires at the grant and the core deletes its node.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "dlock/dlock.h"
#include "test_server.h"

namespace dlock::zookeeper::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string outage_uri(const std::string& prefix) {
  return "zk://" + hosts() + "/?prefix=" + prefix +
         "&session_timeout=2s&connect_timeout=5s&command_timeout=3s";
}

TEST(ZkOutage, TheFirstWaiterAfterAServerFreezeGetsALiveHold) {
  const auto prefix = fresh_prefix();
  auto holder = dlock::open(outage_uri(prefix));
  auto waiter = dlock::open(outage_uri(prefix));
  const auto s = waiter->capabilities().lost_signal_bound;  // S, as the server granted it
  ASSERT_LE(s, 3000ms) << "the server grants a longer session than this test is meant for";
  auto zh = raw();

  auto h = holder->try_lock("n");
  ASSERT_TRUE(h);
  std::optional<Lease> w;
  Clock::time_point granted_at{};
  std::atomic<bool> done{false};
  std::thread t([&] {
    try {
      w = waiter->try_lock("n", Wait::for_duration(10 * s));
    } catch (const Error& e) {
      ADD_FAILURE() << "the waiter's acquire threw: " << e.what();
    }
    granted_at = Clock::now();
    done = true;
  });
  const bool queued = eventually([&] { return lock_nodes(zh.get(), prefix).size() == 2; }, 5s);
  if (queued) {
    std::this_thread::sleep_for(s);  // a few background syncs answered: the steady state
    Frozen frozen(server_pid());
    std::this_thread::sleep_for(s / 2);
  }
  // The holder's hold may have been lost meanwhile (its release then returns false at once);
  // a release while the client reconnects throws unavailable: again until it is answered.
  const bool released = eventually(
      [&] {
        try {
          (void)h->release();
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      3 * s);
  const bool granted = eventually([&] { return done.load(); }, 3 * s);
  if (!granted) (void)eventually([&] { return done.load(); }, 10 * s);  // never leave t running
  t.join();
  ASSERT_TRUE(queued) << "the waiter never queued";
  ASSERT_TRUE(released) << "the holder's release kept failing after the server came back";
  ASSERT_TRUE(granted) << "the waiter was not granted within 3 S of the holder's release";
  ASSERT_TRUE(w) << "the waiter timed out";

  const auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  const auto expires_in = w->expires_at() - granted_at;
  RecordProperty("expires_in_at_grant_ms", std::to_string(ms(expires_in)));
  EXPECT_TRUE(w->held()) << "granted dead: expires_at() was " << ms(expires_in)
                         << " ms from the grant";
  const bool lost = eventually([&] { return w->lost_token().stop_requested(); }, s / 2);
  EXPECT_FALSE(lost) << "the lost signal fired " << ms(Clock::now() - granted_at)
                     << " ms after the grant (expires_at() was " << ms(expires_in)
                     << " ms from it, S = " << s.count() << " ms)";
  EXPECT_EQ(lock_nodes(zh.get(), prefix).size(), 1u)
      << "the waiter's node was deleted under its hold";
  EXPECT_TRUE(w->held());
  EXPECT_TRUE(w->release()) << "the hold was gone by the time it was released";
}

}  // namespace
}  // namespace dlock::zookeeper::test
