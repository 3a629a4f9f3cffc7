// What a provider says about itself matches what its registration claims, and what it does
// not claim it refuses clearly.
#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Capabilities);

TEST_P(Capabilities, ProviderReportsTheRegisteredClaims) {
  auto p = open();
  const auto& caps = p->capabilities();
  EXPECT_EQ(caps.reentrant, claims().reentrant);
  EXPECT_EQ(caps.read_write, claims().read_write);
  EXPECT_EQ(caps.fair, claims().fair);
  EXPECT_EQ(caps.fencing, claims().fencing);
  EXPECT_EQ(caps.push_wakeup, claims().push_wakeup);
  EXPECT_EQ(caps.liveness, claims().liveness);
  EXPECT_EQ(caps.default_lease, ctx().short_lease) << "the env's URI should select the short lease";
  EXPECT_GE(caps.max_name_bytes, 64u);
  EXPECT_GT(caps.lost_signal_bound.count(), 0);
  EXPECT_GT(caps.crash_release_bound.count(), 0);
}

TEST_P(Capabilities, UnclaimedCapabilitiesAreRefusedAsUnsupported) {
  auto p = open();
  const auto n = name();
  if (!claims().read_write) {
    DLOCK_EXPECT_ERROR(p->try_lock_shared(n), ErrorCode::unsupported);
  }
  if (!claims().fair) {
    AcquireOptions fair;
    fair.fair = true;
    DLOCK_EXPECT_ERROR(p->try_lock(n, Wait::try_once(), fair), ErrorCode::unsupported);
  }
  // Nothing was left behind by the refused calls.
  auto lease = p->try_lock(n);
  EXPECT_TRUE(lease.has_value());
}

TEST_P(Capabilities, BadOptionsAreInvalidArguments) {
  auto p = open();
  const auto n = name();
  AcquireOptions o;
  o.lease = milliseconds(0);
  DLOCK_EXPECT_ERROR(p->try_lock(n, Wait::try_once(), o), ErrorCode::invalid_argument);
  o.lease = milliseconds(-5);
  DLOCK_EXPECT_ERROR(p->try_lock(n, Wait::try_once(), o), ErrorCode::invalid_argument);
  AcquireOptions h;
  h.max_hold = milliseconds(0);
  DLOCK_EXPECT_ERROR(p->try_lock(n, Wait::try_once(), h), ErrorCode::invalid_argument);
  AcquireOptions empty_owner;
  empty_owner.owner = "";
  DLOCK_EXPECT_ERROR(p->try_lock(n, Wait::try_once(), empty_owner), ErrorCode::invalid_argument);
  AcquireOptions long_owner;
  long_owner.owner = std::string(257, 'o');
  DLOCK_EXPECT_ERROR(p->try_lock(n, Wait::try_once(), long_owner), ErrorCode::invalid_argument);
  AcquireOptions max_owner;
  max_owner.owner = std::string(256, 'o');
  auto lease = p->try_lock(n, Wait::try_once(), max_owner);
  EXPECT_TRUE(lease.has_value()) << "a 256-byte owner is valid";
}

}  // namespace dlock::conformance
