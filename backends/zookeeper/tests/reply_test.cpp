// Unit tests of Reply and its OneShotFlag (reply.h): the wait every ZooKeeper request's
// caller does. No server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "reply.h"

namespace dlock::zookeeper {
namespace {

using namespace std::chrono_literals;
using Clock = OneShotFlag::Clock;

TEST(OneShotFlag, SetBeforeTheWaitAnswersAtOnceEvenWithADeadlinePast) {
  OneShotFlag flag;
  EXPECT_FALSE(flag.is_set());
  flag.set();
  EXPECT_TRUE(flag.is_set());
  EXPECT_TRUE(flag.wait_until(Clock::now() - 1s));
  EXPECT_TRUE(flag.wait_until(Clock::now() + 1s));
}

TEST(OneShotFlag, UnsetFlagTimesOutAtTheDeadlineNotBefore) {
  OneShotFlag flag;
  EXPECT_FALSE(flag.wait_until(Clock::now()));  // a poll
  const auto start = Clock::now();
  EXPECT_FALSE(flag.wait_until(start + 50ms));
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 2s);
  EXPECT_FALSE(flag.is_set());
}

TEST(OneShotFlag, SetFromAnotherThreadWakesEverySleeper) {
  OneShotFlag flag;
  std::atomic<int> woken{0};
  std::vector<std::thread> sleepers;
  for (int i = 0; i < 4; ++i) {
    sleepers.emplace_back([&] {
      if (flag.wait_until(Clock::now() + 30s)) woken.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(50ms);  // let them sleep in the kernel
  const auto set_at = Clock::now();
  flag.set();
  for (auto& t : sleepers) t.join();
  EXPECT_EQ(woken.load(), 4);
  EXPECT_LT(Clock::now() - set_at, 5s) << "woken by set(), not by the 30 s deadline";
}

TEST(Reply, CarriesTheValueSetOnAnotherThread) {
  Reply<std::string> reply;
  std::thread completion([&] {
    std::this_thread::sleep_for(20ms);
    reply.set("/dlock/n/_c-0000000007");
  });
  const auto start = Clock::now();
  const auto answer = reply.wait_until(start + 30s);
  EXPECT_LT(Clock::now() - start, 5s) << "woken by set(), not by the deadline";
  completion.join();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(*answer, "/dlock/n/_c-0000000007");
  EXPECT_EQ(reply.wait_until(Clock::now()), answer) << "read again";
}

TEST(Reply, NoAnswerByTheDeadlineIsNullopt) {
  Reply<int> reply;
  EXPECT_FALSE(reply.wait_until(Clock::now() + 10ms).has_value());
  reply.set(7);  // a late completion still lands
  EXPECT_EQ(reply.wait_until(Clock::now()), 7);
}

TEST(Reply, ManyRoundsNeverLoseAWakeUp) {
  // A set() racing with the waiter's going to sleep must wake it: 2,000 rounds, each
  // bounded by a deadline far longer than a round.
  for (int i = 0; i < 2000; ++i) {
    Reply<int> reply;
    const auto start = Clock::now();
    std::thread completion([&] { reply.set(i); });
    const auto answer = reply.wait_until(start + 10s);
    const auto waited = Clock::now() - start;
    completion.join();
    ASSERT_EQ(answer, i) << "round " << i;
    ASSERT_LT(waited, 5s) << "round " << i << ": woken by the deadline, not by set()";
  }
}

}  // namespace
}  // namespace dlock::zookeeper
