// Contract 7: fencing tokens strictly increase across successive holders of a name — across
// providers, a thousand holders, and holders that crashed.
#include "framework/conformance_test.h"
#include "framework/taker_client.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Fencing);

TEST_P(Fencing, StrictlyIncreasingAcrossAThousandHolders) {
  DLOCK_REQUIRE_CLAIM(fencing);
  auto p1 = open();
  auto p2 = open();
  const auto n = name();
  std::uint64_t last = 0;
  int backwards = 0;
  const auto start = Clock::now();
  for (int i = 0; i < 1000; ++i) {
    auto lease = (i % 2 ? p1 : p2)->try_lock(n, Wait::for_duration(std::chrono::seconds(5)));
    ASSERT_TRUE(lease) << "holder " << i;
    if (lease->fencing_token() <= last && backwards++ < 5) {
      ADD_FAILURE() << "holder " << i << " got token " << lease->fencing_token() << " after " << last;
    }
    last = lease->fencing_token();
    EXPECT_TRUE(lease->release());
  }
  std::cout << "[conformance] " << ctx().backend << " 1000 acquire+release: " << ms_since(start) << " ms\n";
}

TEST_P(Fencing, StrictlyIncreasingAcrossCrashes) {
  DLOCK_REQUIRE_CLAIM(fencing);
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  const auto n = name();
  std::uint64_t last = 0;
  const auto bound = p->capabilities().crash_release_bound;
  for (int round = 0; round < 3; ++round) {
    Taker taker(env().uri());
    auto theirs = taker.acquire(n, bound + tol());
    ASSERT_TRUE(theirs) << "round " << round;
    EXPECT_GT(theirs->token, last) << "a new process got an old token, round " << round;
    const auto died = taker.kill9();
    HoldRecord h;
    h.name = n;
    h.owner = "taker " + std::to_string(round);
    h.token = theirs->token;
    h.start_ns = theirs->start_ns;
    h.end_ns = died;
    checker().record(h);
    auto ours = track(*p, n, Wait::for_duration(bound + tol()));
    ASSERT_TRUE(ours) << "round " << round;
    EXPECT_GT(ours->token(), theirs->token) << "token did not increase after a crash";
    last = ours->token();
  }
}

}  // namespace dlock::conformance
