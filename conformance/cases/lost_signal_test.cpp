// Contract 6: when a held lock is destroyed from outside (the saboteur), the lost signal
// fires within the backend's declared bound, the old holder cannot disturb the next one, and
// the callbacks run.
#include <atomic>
#include <thread>

#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(LostSignal);

TEST_P(LostSignal, SaboteurFiresItWithinTheDeclaredBound) {
  auto p = open();
  auto other = open();
  const auto n = name();
  auto a = track(*p, n, Wait::try_once());
  ASSERT_TRUE(a);
  std::atomic<int> callbacks{0};
  a->lease().on_lost([&] { ++callbacks; });
  const auto bound = p->capabilities().lost_signal_bound;
  const auto at = now_ns();
  const auto start = Clock::now();
  ASSERT_NO_THROW(env().sabotage(n));
  checker().sabotaged(n, at);
  EXPECT_TRUE(eventually([&] { return a->lost_ns().has_value(); }, bound + tol()))
      << "no lost signal within the declared " << bound.count() << " ms";
  std::cout << "[conformance] " << ctx().backend << " lost signal " << ms_since(start)
            << " ms after sabotage (declared bound " << bound.count() << " ms)\n";
  EXPECT_TRUE(eventually([&] { return callbacks == 1; }, milliseconds(200))) << "on_lost did not run once";
  EXPECT_FALSE(a->lease().held());
  auto b = track(*other, n, Wait::for_duration(bound + tol()));
  ASSERT_TRUE(b) << "the sabotaged lock is not free";
  EXPECT_FALSE(a->lease().release()) << "release of a lost lock reported success";
  EXPECT_FALSE(open()->try_lock(n).has_value()) << "the lost holder's release freed the new holder";
  EXPECT_EQ(callbacks, 1);
}

TEST_P(LostSignal, CallbackRegisteredAfterLossRunsAtOnce) {
  auto p = open();
  const auto n = name();
  auto a = track(*p, n, Wait::try_once());
  ASSERT_TRUE(a);
  ASSERT_NO_THROW(env().sabotage(n));
  checker().sabotaged(n, now_ns());
  ASSERT_TRUE(eventually([&] { return a->lost_ns().has_value(); },
                         p->capabilities().lost_signal_bound + tol()));
  bool ran = false;
  a->lease().on_lost([&] { ran = true; });
  EXPECT_TRUE(ran) << "on_lost after the signal must run at once, on the calling thread";
}

TEST_P(LostSignal, StaleReleaseBeforeTheSignalReportsNotHeldAndSparesTheNewHolder) {
  // Contract 2: a release of a lock destroyed from outside reports "not held" and never
  // touches the next holder's lock, even when it comes before the holder was told (the
  // core has not seen the loss yet and asks the backend).
  auto p = open();
  auto other = open();
  auto third = open();
  const auto n = name();
  auto a = track(*p, n, Wait::try_once());
  ASSERT_TRUE(a);
  const auto at = now_ns();
  ASSERT_NO_THROW(env().sabotage(n));
  checker().sabotaged(n, at);
  auto b = track(*other, n, Wait::for_duration(p->capabilities().lost_signal_bound + tol()));
  ASSERT_TRUE(b) << "the sabotaged lock is not free";
  const bool told_before = a->lost_ns().has_value();
  EXPECT_FALSE(a->release()) << "release of a destroyed lock reported success"
                             << (told_before ? "" : " (before its lost signal)");
  EXPECT_TRUE(b->lease().held());
  EXPECT_FALSE(third->try_lock(n).has_value()) << "the stale holder's release freed the new holder's lock";
  EXPECT_TRUE(b->release());
  EXPECT_TRUE(third->try_lock(n).has_value());
}

}  // namespace dlock::conformance
