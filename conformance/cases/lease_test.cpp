// Contracts 2, 4 and 5: explicit leases run out on time (and not before), a stale holder
// cannot touch its successor's lock, the watchdog keeps a default lease alive, and max_hold
// stops it.
#include <atomic>
#include <thread>
#include <vector>

#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Leases);

namespace {
constexpr milliseconds kLease{1000};
}

TEST_P(Leases, ExpiryFreesTheLockWithinLeasePlusTolerance) {
  auto p = open();
  auto other = open();
  const auto n = name();
  AcquireOptions o;
  o.lease = kLease;
  const auto start = Clock::now();
  auto a = track(*p, n, Wait::try_once(), o);
  ASSERT_TRUE(a);
  auto b = track(*other, n, Wait::for_duration(kLease + tol() + tol()));
  const auto took = ms_since(start);
  ASSERT_TRUE(b) << "not free " << took << " ms after a " << kLease.count() << " ms lease";
  EXPECT_GE(took, kLease.count() - 1) << "granted to another before the lease ran out";
  EXPECT_LE(took, (kLease + tol()).count());
  EXPECT_TRUE(a->lost_ns().has_value()) << "the expired holder was not told";
  EXPECT_FALSE(a->lease().held());
}

TEST_P(Leases, StaleHolderCannotReleaseOrExtendTheNewHoldersLock) {
  auto p = open();
  auto other = open();
  auto third = open();
  const auto n = name();
  AcquireOptions o;
  o.lease = kLease;
  auto stale = track(*p, n, Wait::try_once(), o);
  ASSERT_TRUE(stale);
  auto fresh = track(*other, n, Wait::for_duration(kLease + tol() * 2));
  ASSERT_TRUE(fresh);
  stale->stop_using();
  DLOCK_EXPECT_ERROR(stale->lease().extend(milliseconds(5000)), ErrorCode::not_held);
  EXPECT_FALSE(stale->lease().release()) << "a stale holder's release reported success";
  EXPECT_TRUE(fresh->lease().held());
  EXPECT_FALSE(third->try_lock(n).has_value()) << "the stale holder freed the new holder's lock";
  EXPECT_TRUE(fresh->release());
  EXPECT_TRUE(third->try_lock(n).has_value());
}

TEST_P(Leases, ExtendMovesTheExpiry) {
  auto p = open();
  auto other = open();
  const auto n = name();
  AcquireOptions o;
  o.lease = kLease;
  const auto start = Clock::now();
  auto a = track(*p, n, Wait::try_once(), o);
  ASSERT_TRUE(a);
  std::this_thread::sleep_for(kLease / 2);
  a->lease().extend(kLease * 2);  // now valid until ~2.5 leases after start
  DLOCK_EXPECT_ERROR(a->lease().extend(milliseconds(0)), ErrorCode::invalid_argument);
  std::this_thread::sleep_for(kLease);  // 1.5 leases after start: the original would be gone
  EXPECT_FALSE(other->try_lock(n).has_value()) << "extend did not keep the lock";
  EXPECT_TRUE(a->lease().held());
  auto b = track(*other, n, Wait::for_duration(kLease * 2 + tol() * 2));
  ASSERT_TRUE(b);
  EXPECT_GE(ms_since(start), (kLease * 5 / 2).count() - 1);
}

TEST_P(Leases, WatchdogKeepsTheLockPastThreeLeases) {
  auto p = open();
  auto other = open();
  const auto n = name();
  auto a = track(*p, n, Wait::try_once());
  ASSERT_TRUE(a);
  // Many more holds on the same provider: renewal must keep up with all of them (batched).
  std::vector<std::unique_ptr<TrackedLease>> many;
  for (int i = 0; i < 40; ++i) {
    many.push_back(track(*p, name("many-" + std::to_string(i)), Wait::try_once()));
    ASSERT_TRUE(many.back());
  }
  const auto until = Clock::now() + lease() * 3 + lease() / 2;
  while (Clock::now() < until) {
    std::this_thread::sleep_for(lease() / 2);
    EXPECT_FALSE(other->try_lock(n).has_value()) << "the watchdog let the lock go";
    ASSERT_TRUE(a->lease().held());
  }
  EXPECT_FALSE(a->lost_ns().has_value());
  for (auto& h : many) {
    EXPECT_TRUE(h->lease().held()) << h->lease().name() << " was not kept";
    EXPECT_FALSE(other->try_lock(h->lease().name()).has_value());
  }
  EXPECT_GT(a->lease().expires_at(), Clock::now()) << "expires_at was not moved by renewal";
  EXPECT_TRUE(a->release());
  EXPECT_TRUE(other->try_lock(n).has_value());
}

TEST_P(Leases, MaxHoldStopsRenewalAndFiresTheLostSignal) {
  auto p = open();
  auto other = open();
  const auto n = name();
  AcquireOptions o;
  o.max_hold = lease() * 3 / 2;
  const auto start = Clock::now();
  auto a = track(*p, n, Wait::try_once(), o);
  ASSERT_TRUE(a);
  EXPECT_TRUE(eventually([&] { return a->lost_ns().has_value(); }, *o.max_hold + lease() + tol()))
      << "max_hold did not fire the lost signal";
  const auto lost_after = ms_since(start);
  EXPECT_GE(lost_after, o.max_hold->count() - 1) << "lost before max_hold";
  auto b = track(*other, n, Wait::for_duration(lease() + tol() * 2));
  EXPECT_TRUE(b) << "the lock was not freed after max_hold";
  EXPECT_LE(ms_since(start), (*o.max_hold + lease() + tol()).count());
}

TEST_P(Leases, OverrunningHoldersAreToldBeforeTheNextGrant) {
  // Holders with a short explicit lease sometimes hold past it. Each overrun must be signalled
  // (lost) before the next holder is granted: the safety checker verifies every hand-over.
  constexpr milliseconds kShort{200};
  std::vector<std::shared_ptr<ILockProvider>> providers{open(), open(), open()};
  const auto n = name();
  std::atomic<int> overruns{0}, failures{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 8; ++i) {
          AcquireOptions o;
          o.lease = kShort;
          try {
            auto h = track(*providers[static_cast<std::size_t>(t)], n,
                           Wait::for_duration(std::chrono::seconds(10)), o);
            if (!h) {
              ++failures;
              continue;
            }
            const bool overrun = (i + t) % 3 == 0;
            std::this_thread::sleep_for(overrun ? kShort + kShort / 2 : kShort / 4);
            if (overrun) {
              ++overruns;
              EXPECT_TRUE(h->lost_ns().has_value()) << "a holder past its lease was not told";
            }
            h->release();
          } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
          }
        }
      });
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(overruns, 0);
}

}  // namespace dlock::conformance
