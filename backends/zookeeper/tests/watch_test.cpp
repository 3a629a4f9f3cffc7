// The server's watch count stays bounded (labels zookeeper;integration): hand-offs, busy
// try-once attempts and waiters that give up leave no watch behind on the server. A leaked
// watch costs server memory for as long as the watched node lives, and every abandoned
// waiter of a long-held lock would add one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "test_server.h"

namespace dlock::zookeeper::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The server-wide watch count once it has settled at or below `bound` (watch removals are
// asynchronous: give them a moment), or the last count seen.
long watches_settled(long bound) {
  long n = total_watches();
  const auto deadline = Clock::now() + 2s;
  while (n > bound && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    n = total_watches();
  }
  return n;
}

// Slack for watches of other clients of the test server that come and go meanwhile (the
// raw handles of other tests): far below the counts a leak produces here.
constexpr long kSlack = 4;

TEST(ZkWatches, WatchCountStaysBounded) {
  const auto prefix = fresh_prefix();
  auto a = dlock::open(uri_for(prefix));
  auto b = dlock::open(uri_for(prefix));
  const long baseline = total_watches();

  // 1. Contended hand-offs: 4 threads on two sessions take turns on one name.
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto& p = (t % 2 == 0) ? a : b;
      for (int i = 0; i < 50; ++i) {
        auto l = p->try_lock("hot", Wait::for_duration(10s));
        if (!l) continue;
        ++granted;
        l->release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 200);
  EXPECT_LE(watches_settled(baseline + kSlack), baseline + kSlack) << "after 200 hand-offs";

  // 2. Busy try-once attempts never set a watch.
  auto held = a->try_lock("busy");
  ASSERT_TRUE(held);
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(b->try_lock("busy"));
  // The hold may have put one watch on its own node (the lost signal's watch).
  EXPECT_LE(watches_settled(baseline + 1 + kSlack), baseline + 1 + kSlack) << "after 1000 busy tries";
  EXPECT_TRUE(held->release());

  // 3. Waiters that give up while the lock stays held: each watched its predecessor (the
  // holder's node); giving up must take that watch off the server, not only off the client.
  constexpr int kNames = 100;
  std::vector<Lease> holds;
  for (int i = 0; i < kNames; ++i) {
    auto l = a->try_lock("held-" + std::to_string(i));
    ASSERT_TRUE(l);
    holds.push_back(std::move(*l));
  }
  for (int i = 0; i < kNames; ++i) {
    EXPECT_FALSE(b->try_lock("held-" + std::to_string(i), Wait::for_duration(20ms)));
  }
  // Allowed: one watch per live hold on its own node, nothing for the waiters that left.
  const long bound = baseline + kNames + kSlack;
  EXPECT_LE(watches_settled(bound), bound) << "abandoned waiters left their watches on the holders' nodes";
  for (auto& l : holds) EXPECT_TRUE(l.release());
  EXPECT_LE(watches_settled(baseline + kSlack), baseline + kSlack) << "after releasing every hold";
}

}  // namespace
}  // namespace dlock::zookeeper::test
