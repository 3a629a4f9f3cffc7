// Contract 8: reentrancy where claimed. The same owner acquires again, each acquire needs a
// release, re-entries share the first hold's token; other owners stay out throughout.
#include <thread>

#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Reentrancy);

TEST_P(Reentrancy, HoldCountsNeedOneReleaseEach) {
  DLOCK_REQUIRE_CLAIM(reentrant);
  auto p = open();
  auto other = open();
  const auto n = name();
  auto first = p->try_lock(n);
  ASSERT_TRUE(first);
  auto second = p->try_lock(n);
  ASSERT_TRUE(second) << "the same owner could not re-enter";
  auto third = p->try_lock(n, Wait::for_duration(milliseconds(100)));
  ASSERT_TRUE(third);
  if (claims().fencing) {
    EXPECT_EQ(second->fencing_token(), first->fencing_token());
    EXPECT_EQ(third->fencing_token(), first->fencing_token());
  }
  EXPECT_TRUE(third->release());
  EXPECT_FALSE(other->try_lock(n).has_value()) << "freed with two holds left";
  EXPECT_TRUE(first->release());  // order of release does not matter
  EXPECT_FALSE(other->try_lock(n).has_value()) << "freed with one hold left";
  EXPECT_TRUE(second->held());
  EXPECT_TRUE(second->release());
  EXPECT_TRUE(other->try_lock(n).has_value()) << "not freed by the last release";
}

TEST_P(Reentrancy, OtherThreadsAreOtherOwners) {
  DLOCK_REQUIRE_CLAIM(reentrant);
  auto p = open();
  const auto n = name();
  auto mine = p->try_lock(n);
  ASSERT_TRUE(mine);
  bool theirs = true;
  std::jthread([&] { theirs = p->try_lock(n).has_value(); }).join();
  EXPECT_FALSE(theirs) << "another thread of the same provider re-entered";
}

TEST_P(Reentrancy, ExplicitOwnerSpansThreads) {
  DLOCK_REQUIRE_CLAIM(reentrant);
  auto p = open();
  auto other = open();
  const auto n = name();
  AcquireOptions job;
  job.owner = "job-42";
  auto first = p->try_lock(n, Wait::try_once(), job);
  ASSERT_TRUE(first);
  std::optional<Lease> second;
  std::jthread([&] { second = p->try_lock(n, Wait::try_once(), job); }).join();
  ASSERT_TRUE(second) << "the explicit owner could not re-enter from another thread";
  EXPECT_FALSE(p->try_lock(n).has_value()) << "the thread's own owner got in beside job-42";
  AcquireOptions stranger;
  stranger.owner = "job-43";
  EXPECT_FALSE(p->try_lock(n, Wait::try_once(), stranger).has_value());
  EXPECT_TRUE(first->release());
  EXPECT_FALSE(other->try_lock(n).has_value());
  EXPECT_TRUE(second->release());
  EXPECT_TRUE(other->try_lock(n).has_value());
}

TEST_P(Reentrancy, NonReentrantBackendRefusesTheSameOwner) {
  if (claims().reentrant) GTEST_SKIP() << kNotClaimed << "non-reentrant (the backend is reentrant)";
  auto p = open();
  const auto n = name();
  auto first = p->try_lock(n);
  ASSERT_TRUE(first);
  EXPECT_FALSE(p->try_lock(n).has_value());
}

}  // namespace dlock::conformance
