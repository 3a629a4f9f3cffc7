// Contract 1: mutual exclusion between threads, providers and processes; distinct names are
// independent; a released lock is free at once.
#include <atomic>
#include <thread>
#include <vector>

#include "framework/conformance_test.h"
#include "framework/taker_client.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Exclusion);

TEST_P(Exclusion, BetweenThreadsAndProviders) {
  auto p1 = open();
  auto p2 = open();
  const auto n = name();
  std::atomic<int> inside{0}, max_inside{0}, done{0};
  std::atomic<bool> errors{false};
  std::vector<std::jthread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      auto& p = t % 2 ? *p1 : *p2;
      for (int i = 0; i < 30; ++i) {
        try {
          auto held = track(p, n, Wait::for_duration(std::chrono::seconds(20)));
          if (!held) {
            errors = true;
            return;
          }
          const int now = ++inside;
          int prev = max_inside;
          while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
          }
          std::this_thread::yield();
          --inside;
          held->release();
          ++done;
        } catch (const std::exception&) {
          errors = true;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(errors) << "an acquire failed or timed out";
  EXPECT_EQ(done, 180);
  EXPECT_EQ(max_inside, 1);
}

TEST_P(Exclusion, BetweenProcesses) {
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  const auto n = name();
  Taker taker(env().uri());
  auto theirs = taker.acquire(n, milliseconds(0));
  ASSERT_TRUE(theirs.has_value());
  HoldRecord h;
  h.name = n;
  h.owner = "taker";
  h.token = theirs->token;
  h.start_ns = theirs->start_ns;
  const auto index = checker().record(h);
  EXPECT_FALSE(p->try_lock(n).has_value()) << "granted while another process holds it";
  // A waiter here is handed the lock when the other process releases.
  std::unique_ptr<TrackedLease> ours;
  std::jthread waiter([&] { ours = track(*p, n, Wait::for_duration(std::chrono::seconds(10))); });
  std::this_thread::sleep_for(milliseconds(200));
  std::int64_t end = 0;
  EXPECT_TRUE(taker.release(&end));
  checker().set_end(index, end);
  waiter.join();
  ASSERT_TRUE(ours);
  // And the other way round.
  EXPECT_FALSE(taker.acquire(n, milliseconds(0)).has_value()) << "the other process got it while we hold it";
  ours->release();
  auto again = taker.acquire(n, milliseconds(2000));
  EXPECT_TRUE(again.has_value());
}

TEST_P(Exclusion, DistinctNamesAreIndependent) {
  auto p1 = open();
  auto p2 = open();
  const auto a = name("a");
  const auto b = name("b");
  auto ha = track(*p1, a, Wait::try_once());
  ASSERT_TRUE(ha);
  auto hb = track(*p2, b, Wait::try_once());
  EXPECT_TRUE(hb) << "holding one name blocked another";
  EXPECT_FALSE(p2->try_lock(a).has_value());
  EXPECT_FALSE(p1->try_lock(b).has_value());
}

TEST_P(Exclusion, ReacquireRightAfterRelease) {
  auto p1 = open();
  auto p2 = open();
  const auto n = name();
  for (int round = 0; round < 20; ++round) {
    auto& first = round % 2 ? *p1 : *p2;
    auto& second = round % 2 ? *p2 : *p1;
    auto h = track(first, n, Wait::try_once());
    ASSERT_TRUE(h) << "round " << round;
    EXPECT_FALSE(second.try_lock(n).has_value());
    EXPECT_TRUE(h->release());
    auto h2 = track(second, n, Wait::try_once());
    ASSERT_TRUE(h2) << "not free right after release, round " << round;
    EXPECT_TRUE(h2->release());
  }
}

}  // namespace dlock::conformance
