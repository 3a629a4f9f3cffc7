// Contract 10: FIFO order among fair waiters, where claimed.
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Fairness);

TEST_P(Fairness, WaitersAreServedInArrivalOrder) {
  DLOCK_REQUIRE_CLAIM(fair);
  constexpr int kWaiters = 5;
  auto holder = open();
  const auto n = name();
  AcquireOptions fair;
  fair.fair = true;
  auto h = track(*holder, n, Wait::try_once(), fair);
  ASSERT_TRUE(h);
  std::mutex mu;
  std::vector<int> order;
  {
    std::vector<std::jthread> waiters;
    for (int i = 0; i < kWaiters; ++i) {
      auto p = open();
      waiters.emplace_back([&, p, i] {
        AcquireOptions o;
        o.fair = true;
        auto got = track(*p, n, Wait::for_duration(std::chrono::seconds(10)), o);
        if (!got) return;
        {
          std::lock_guard lock(mu);
          order.push_back(i);
        }
        std::this_thread::sleep_for(milliseconds(20));
        got->release();
      });
      std::this_thread::sleep_for(milliseconds(100));  // arrival order = i
    }
    h->release();
  }
  std::vector<int> expected;
  for (int i = 0; i < kWaiters; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected) << "fair waiters were not served first come, first served";
}

// Contracts 9 and 10 together: a fair reader queued before a fair writer is the head of the
// queue; the writer behind it must not keep it out (writer preference is for writers ahead
// of a reader, not behind it). Both are served, in arrival order, once the holder releases.
TEST_P(Fairness, FairReaderQueuedBeforeFairWriterAreServedInOrder) {
  DLOCK_REQUIRE_CLAIM(fair);
  DLOCK_REQUIRE_CLAIM(read_write);
  constexpr auto kWait = std::chrono::seconds(10);
  auto holder = open();
  auto rp = open();
  auto wp = open();
  const auto n = name();
  AcquireOptions fair;
  fair.fair = true;
  auto h = track(*holder, n, Wait::try_once(), fair);
  ASSERT_TRUE(h);
  std::mutex mu;
  std::vector<std::string> order;
  long long reader_after_ms = -1;
  Clock::time_point released;
  {
    std::jthread reader([&] {
      auto got = track(*rp, n, Wait::for_duration(kWait), fair, LockMode::shared);
      if (!got) return;
      {
        std::lock_guard lock(mu);
        order.push_back("reader");
        reader_after_ms = ms_since(released);
      }
      std::this_thread::sleep_for(milliseconds(50));
      got->release();
    });
    std::this_thread::sleep_for(milliseconds(200));  // the reader queues first
    std::jthread writer([&] {
      auto got = track(*wp, n, Wait::for_duration(kWait), fair);
      if (!got) return;
      {
        std::lock_guard lock(mu);
        order.push_back("writer");
      }
      got->release();
    });
    std::this_thread::sleep_for(milliseconds(200));  // then the writer
    {
      std::lock_guard lock(mu);
      released = Clock::now();
    }
    h->release();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"reader", "writer"}))
      << "a fair reader and the fair writer queued behind it were not both served in order";
  EXPECT_GE(reader_after_ms, 0) << "the fair reader was never granted";
  EXPECT_LT(reader_after_ms, (milliseconds(2000) + tol()).count())
      << "the fair reader (the queue's head) waited long after the holder released";
}

}  // namespace dlock::conformance
