// Contract 2: release is idempotent, never fires the lost signal, and destructors and move
// assignment release; a released lease is inert.
#include <atomic>

#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Release);

TEST_P(Release, IsIdempotentAndNeverFiresTheLostSignal) {
  auto p = open();
  auto other = open();
  const auto n = name();
  auto lease = p->try_lock(n);
  ASSERT_TRUE(lease);
  std::atomic<int> callbacks{0};
  lease->on_lost([&] { ++callbacks; });
  const auto token = lease->lost_token();
  EXPECT_TRUE(lease->held());
  EXPECT_TRUE(lease->release());
  EXPECT_FALSE(lease->held());
  EXPECT_FALSE(lease->release());
  EXPECT_FALSE(lease->release());
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(token.stop_requested()) << "release fired the lost signal";
  EXPECT_EQ(callbacks, 0);
  EXPECT_TRUE(other->try_lock(n).has_value());
  DLOCK_EXPECT_ERROR(lease->extend(milliseconds(1000)), ErrorCode::not_held);
}

TEST_P(Release, DestructorAndMoveAssignmentRelease) {
  auto p = open();
  auto other = open();
  const auto a = name("a");
  const auto b = name("b");
  {
    auto lease = p->try_lock(a);
    ASSERT_TRUE(lease);
  }
  EXPECT_TRUE(other->try_lock(a).has_value()) << "the destructor did not release";
  auto la = p->try_lock(a);
  auto lb = p->try_lock(b);
  ASSERT_TRUE(la && lb);
  *la = std::move(*lb);  // releases a, takes over b
  EXPECT_TRUE(other->try_lock(a).has_value()) << "move assignment did not release the old hold";
  EXPECT_FALSE(other->try_lock(b).has_value());
  EXPECT_EQ(la->name(), b);
  EXPECT_TRUE(la->release());
  EXPECT_TRUE(other->try_lock(b).has_value());
}

TEST_P(Release, LeaseOutlivesItsProvider) {
  auto other = open();
  const auto n = name();
  std::optional<Lease> lease;
  {
    auto p = dlock::open(env().uri());
    lease = p->try_lock(n);
    ASSERT_TRUE(lease);
  }  // the provider is gone; the lease keeps what it needs
  EXPECT_TRUE(lease->held());
  EXPECT_FALSE(other->try_lock(n).has_value());
  EXPECT_TRUE(lease->release()) << "a lease could not release after its provider was destroyed";
  EXPECT_TRUE(other->try_lock(n).has_value());
  EXPECT_TRUE(env().residue().empty()) << ::testing::PrintToString(env().residue());
}

TEST_P(Release, EmptyLeaseIsInert) {
  Lease empty;
  EXPECT_FALSE(empty.held());
  EXPECT_FALSE(empty.release());
  EXPECT_EQ(empty.fencing_token(), 0u);
  EXPECT_FALSE(empty.lost_token().stop_possible() && empty.lost_token().stop_requested());
}

}  // namespace dlock::conformance
