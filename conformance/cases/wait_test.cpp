// Contract 3: bounded waiting. Every kind of wait returns within its bound; a waiter is handed
// the lock when it is released; a waiter that gives up leaves nothing behind.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Waits);

namespace {
constexpr milliseconds kWait{200};

// Sorts `samples`, prints "<backend> <what>: p50 <x> <unit>, max <y> <unit>" and returns the
// p50 (the sample at size/2).
long long print_median(const std::string& backend, const char* what, std::vector<long long>& samples,
                       const char* unit) {
  std::sort(samples.begin(), samples.end());
  const long long p50 = samples[samples.size() / 2];
  std::cout << "[conformance] " << backend << " " << what << ": p50 " << p50 << " " << unit << ", max "
            << samples.back() << " " << unit << "\n";
  return p50;
}
}  // namespace

TEST_P(Waits, TryOnceReturnsAtOnce) {
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  const auto start = Clock::now();
  EXPECT_FALSE(other->try_lock(n, Wait::try_once()).has_value());
  EXPECT_FALSE(other->try_lock(n, Wait::for_duration(milliseconds(0))).has_value());
  EXPECT_FALSE(other->try_lock(n, Wait::for_duration(milliseconds(-50))).has_value());
  EXPECT_FALSE(other->try_lock(n, Wait::until(Clock::now() - std::chrono::seconds(1))).has_value());
  EXPECT_LE(ms_since(start), tol().count()) << "four try-once calls";
}

TEST_P(Waits, DurationReturnsWithinItsBound) {
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  const auto start = Clock::now();
  EXPECT_FALSE(other->try_lock(n, Wait::for_duration(kWait)).has_value());
  const auto took = ms_since(start);
  EXPECT_GE(took, kWait.count() - 1) << "gave up before the wait ran out";
  EXPECT_LE(took, (kWait + tol()).count());
}

TEST_P(Waits, DeadlineReturnsWithinItsBound) {
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  const auto start = Clock::now();
  EXPECT_FALSE(other->try_lock(n, Wait::until(start + kWait)).has_value());
  const auto took = ms_since(start);
  EXPECT_GE(took, kWait.count() - 1);
  EXPECT_LE(took, (kWait + tol()).count());
}

TEST_P(Waits, AcquireThrowsTimedOutAndCancelled) {
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  DLOCK_EXPECT_ERROR(other->acquire(n, LockMode::exclusive, Wait::for_duration(milliseconds(50))),
                     ErrorCode::timed_out);
  std::stop_source stop;
  stop.request_stop();
  AcquireOptions o;
  o.cancel = stop.get_token();
  const auto start = Clock::now();
  DLOCK_EXPECT_ERROR(other->acquire(n, LockMode::exclusive, Wait::forever(), o), ErrorCode::cancelled);
  EXPECT_LE(ms_since(start), tol().count()) << "an already-cancelled wait must end at once";
}

TEST_P(Waits, InfiniteWaitEndsOnCancel) {
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  std::stop_source stop;
  AcquireOptions o;
  o.cancel = stop.get_token();
  std::atomic<long long> returned_after{-1};
  bool got = true;
  Clock::time_point cancelled_at;
  {
    std::jthread waiter([&] {
      auto lease = other->try_lock(n, Wait::forever(), o);
      got = lease.has_value();
      returned_after = std::chrono::duration_cast<milliseconds>(Clock::now() - cancelled_at).count();
    });
    std::this_thread::sleep_for(kWait);
    cancelled_at = Clock::now();
    stop.request_stop();
  }
  EXPECT_FALSE(got) << "a cancelled waiter got the lock";
  EXPECT_LE(returned_after.load(), tol().count()) << "cancel took too long to end the wait";
}

TEST_P(Waits, WaiterIsHandedTheLockOnRelease) {
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = track(*holder, n, Wait::try_once());
  ASSERT_TRUE(h);
  std::unique_ptr<TrackedLease> got;
  Clock::time_point released_at;
  long long handoff_ms = -1;
  {
    std::jthread waiter([&] {
      got = track(*other, n, Wait::for_duration(std::chrono::seconds(10)));
      handoff_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - released_at).count();
    });
    std::this_thread::sleep_for(milliseconds(300));
    released_at = Clock::now();
    h->release();
  }
  ASSERT_TRUE(got);
  std::cout << "[conformance] " << ctx().backend << " hand-off after release: " << handoff_ms << " ms\n";
  if (claims().push_wakeup) {
    EXPECT_LE(handoff_ms, tol().count()) << "push wake-up claimed, but the waiter took long to notice the release";
  } else {
    EXPECT_LE(handoff_ms, tol().count() + 1000);
  }
  // Contract 3 for a waiter that was granted: once it releases, nothing of its wait is left
  // (a queue entry, a registration for wake-ups).
  EXPECT_TRUE(got->release());
  EXPECT_TRUE(env().residue().empty()) << "left behind: " << ::testing::PrintToString(env().residue());
}

TEST_P(Waits, GivenUpWaitersLeaveNothingBehind) {
  auto holder = open();
  auto waiters = open();
  auto third = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  // Timed-out and cancelled waiters, fair ones too where fairness is claimed.
  for (int i = 0; i < 6; ++i) {
    AcquireOptions o;
    o.fair = claims().fair && i % 2 == 0;
    EXPECT_FALSE(waiters->try_lock(n, Wait::for_duration(milliseconds(30)), o).has_value());
  }
  {
    std::vector<std::jthread> cancelled;
    std::stop_source stop;
    for (int i = 0; i < 4; ++i) {
      cancelled.emplace_back([&, i] {
        AcquireOptions o;
        o.fair = claims().fair && i % 2 == 1;
        o.cancel = stop.get_token();
        EXPECT_FALSE(waiters->try_lock(n, Wait::forever(), o).has_value());
      });
    }
    std::this_thread::sleep_for(milliseconds(150));
    stop.request_stop();
  }
  EXPECT_TRUE(h->release());
  // A leftover queue entry or waiter node would keep the next newcomer out.
  const auto start = Clock::now();
  AcquireOptions fair;
  fair.fair = claims().fair;
  auto next = third->try_lock(n, Wait::try_once(), fair);
  EXPECT_TRUE(next.has_value()) << "a waiter that gave up left something that blocks the lock";
  EXPECT_LE(ms_since(start), tol().count());
  next.reset();
  // And nothing is left in the backend's storage (queue entries, waiter nodes, holders).
  EXPECT_TRUE(eventually([&] { return env().residue().empty(); }, tol()))
      << "left behind: " << ::testing::PrintToString(env().residue());
}

TEST_P(Waits, PushWakeupHandsOffWithoutPolling) {
  // Contract 3: waiters are woken by the backend, polling is only the fallback. Twenty
  // hand-offs from a holder to a blocked waiter: the median must be far below any poll interval.
  DLOCK_REQUIRE_CLAIM(push_wakeup);
  auto holder = open();
  auto waiter = open();
  const auto n = name();
  std::vector<long long> us;
  for (int i = 0; i < 20; ++i) {
    auto h = holder->try_lock(n, Wait::for_duration(tol()));
    ASSERT_TRUE(h);
    std::atomic<long long> released_at{0};
    std::optional<Lease> got;
    long long got_at = 0;
    {
      std::jthread w([&] {
        got = waiter->try_lock(n, Wait::for_duration(std::chrono::seconds(5)));
        got_at = now_ns();
      });
      std::this_thread::sleep_for(milliseconds(30));  // the waiter is blocked by now
      released_at = now_ns();
      h->release();
    }
    ASSERT_TRUE(got) << "hand-off " << i;
    us.push_back((got_at - released_at) / 1000);
  }
  const long long p50 = print_median(ctx().backend, "hand-off latency", us, "us");
  EXPECT_LE(p50, 20000) << "median hand-off " << p50 << " us: the waiter is polling, not woken";
}

TEST_P(Waits, FailedTryOnceLeavesNothingBehind) {
  // Contract 3: a try-once that finds the lock busy leaves nothing behind either: no queue
  // entry that would make the next fair newcomer wait its turn behind a caller that is gone,
  // no writer preference that would keep readers out.
  auto holder = open();
  auto tries = open();
  auto third = open();
  const auto n = name();
  AcquireOptions fair;
  fair.fair = claims().fair;
  auto h = holder->try_lock(n, Wait::try_once(), fair);
  ASSERT_TRUE(h);
  for (int i = 0; i < 4; ++i) {
    AcquireOptions o;
    o.fair = claims().fair && i % 2 == 0;
    EXPECT_FALSE(tries->try_lock(n, Wait::try_once(), o).has_value());
    if (claims().read_write) {
      EXPECT_FALSE(tries->try_lock_shared(n, Wait::try_once(), o).has_value());
    }
  }
  EXPECT_TRUE(h->release());
  auto next = third->try_lock(n, Wait::try_once(), fair);
  EXPECT_TRUE(next.has_value()) << "a failed try-once left something that blocks the lock";
  next.reset();
  if (claims().read_write) {
    auto reader = holder->try_lock_shared(n);
    ASSERT_TRUE(reader);
    EXPECT_FALSE(tries->try_lock(n, Wait::try_once()).has_value()) << "a writer got in beside a reader";
    EXPECT_TRUE(third->try_lock_shared(n).has_value())
        << "a writer's failed try-once keeps new readers out as if it were waiting";
    EXPECT_TRUE(reader->release());
  }
  EXPECT_TRUE(env().residue().empty()) << "left behind: " << ::testing::PrintToString(env().residue());
}

TEST_P(Waits, ShortWaitsEndOnTime) {
  // Contract 3: a wait returns within the wait plus one round trip. Waits shorter than any
  // fallback poll must still end at their deadline, not at the next poll: the median overshoot
  // of nine waits is far below a poll interval (a single one may meet scheduling noise).
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  std::vector<long long> overshoot_ms;
  for (int i = 0; i < 9; ++i) {
    const milliseconds wait{15 + 10 * i};
    const auto start = Clock::now();
    const bool deadline_form = i % 2 == 1;
    const bool got = deadline_form ? other->try_lock(n, Wait::until(start + wait)).has_value()
                                   : other->try_lock(n, Wait::for_duration(wait)).has_value();
    const auto took = ms_since(start);
    EXPECT_FALSE(got);
    EXPECT_GE(took, wait.count() - 1) << "gave up before the wait ran out";
    EXPECT_LE(took, (wait + tol()).count());
    overshoot_ms.push_back(took - wait.count());
  }
  const long long p50 = print_median(ctx().backend, "wait overshoot", overshoot_ms, "ms");
  EXPECT_LE(p50, 30) << "median overshoot " << p50 << " ms: the wait ends at a poll, not at its deadline";
}

TEST_P(Waits, CancelEndsTheWaitPromptly) {
  // Contract 3: cancellation wakes the waiter; it is not noticed only at the next poll. Nine
  // waits cancelled at different moments: the median delay is far below a poll interval.
  auto holder = open();
  auto other = open();
  const auto n = name();
  auto h = holder->try_lock(n);
  ASSERT_TRUE(h);
  std::vector<long long> delay_ms;
  for (int i = 0; i < 9; ++i) {
    std::stop_source stop;
    AcquireOptions o;
    o.cancel = stop.get_token();
    std::atomic<std::int64_t> returned_ns{0};
    bool got = true;
    std::int64_t cancelled_ns = 0;
    {
      std::jthread waiter([&] {
        got = other->try_lock(n, Wait::forever(), o).has_value();
        returned_ns = now_ns();
      });
      std::this_thread::sleep_for(milliseconds(15 + 10 * i));
      cancelled_ns = now_ns();
      stop.request_stop();
    }
    EXPECT_FALSE(got) << "a cancelled waiter got the lock";
    delay_ms.push_back((returned_ns.load() - cancelled_ns) / 1'000'000);
    EXPECT_LE(delay_ms.back(), tol().count()) << "cancel took too long to end the wait";
  }
  const long long p50 = print_median(ctx().backend, "cancel delay", delay_ms, "ms");
  EXPECT_LE(p50, 30) << "median delay " << p50
                     << " ms after cancel: the waiter notices it at a poll, not when it happens";
}

}  // namespace dlock::conformance
