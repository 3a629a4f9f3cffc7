// Contract 7: fencing tokens strictly increase across successive holders of a name — across
// providers, a thousand holders, and holders that crashed.
#include <algorithm>

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

TEST_P(Fencing, ReadersAndWritersTakeTurnsWithIncreasingTokens) {
  // Contract 7 with contract 9: a reader is a holder too. A reader after a writer gets a token
  // above the writer's (a resource checking tokens can tell the reader came later), and a
  // writer after readers a token above every reader's.
  DLOCK_REQUIRE_CLAIM(fencing);
  DLOCK_REQUIRE_CLAIM(read_write);
  auto p1 = open();
  auto p2 = open();
  const auto n = name();
  std::uint64_t last_writer = 0;
  for (int round = 0; round < 3; ++round) {
    auto w = (round % 2 ? p1 : p2)->try_lock(n);
    ASSERT_TRUE(w) << "round " << round;
    EXPECT_GT(w->fencing_token(), last_writer) << "round " << round;
    const auto wt = w->fencing_token();
    EXPECT_TRUE(w->release());
    auto r1 = p1->try_lock_shared(n);
    auto r2 = p2->try_lock_shared(n);
    ASSERT_TRUE(r1 && r2) << "round " << round;
    EXPECT_GT(r1->fencing_token(), wt) << "a reader after a writer got a token not above the writer's, round " << round;
    EXPECT_GT(r2->fencing_token(), wt) << "a reader after a writer got a token not above the writer's, round " << round;
    const auto readers_max = std::max(r1->fencing_token(), r2->fencing_token());
    EXPECT_TRUE(r1->release());
    EXPECT_TRUE(r2->release());
    auto w2 = p1->try_lock(n);
    ASSERT_TRUE(w2) << "round " << round;
    EXPECT_GT(w2->fencing_token(), readers_max) << "a writer after readers got a token not above theirs, round " << round;
    last_writer = w2->fencing_token();
    EXPECT_TRUE(w2->release());
  }
}

}  // namespace dlock::conformance
