// Contract 10: FIFO order among fair waiters, where claimed.
#include <mutex>
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

}  // namespace dlock::conformance
