// Backends that run on a server ensemble (Claims::ensemble, ZooKeeper): losing a member,
// the leader included, keeps every guarantee; losing the quorum fires the lost signal
// within the bound, and the name is free again once the quorum is back.
#include <atomic>
#include <thread>

#include "framework/conformance_test.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Ensemble);

// Stops each member in turn (one of them is the leader) while a lock is held and another
// provider waits for it: no lost signal, the waiter keeps waiting, tokens keep increasing,
// and after the release the waiter is served.
TEST_P(Ensemble, MemberLossKeepsLocksAndServesWaiters) {
  DLOCK_REQUIRE_CLAIM(ensemble);
  ASSERT_GE(env().members(), 3);
  auto p = open();
  auto q = open();
  const auto n = name();
  std::uint64_t last = 0;
  for (int i = 0; i < env().members(); ++i) {
    auto h = track(*p, n, Wait::for_duration(lease() * 2));
    ASSERT_TRUE(h) << "no grant with member " << i << " back";
    EXPECT_GT(h->token(), last);
    last = h->token();
    std::atomic<bool> granted{false};
    std::atomic<std::uint64_t> waiter_token{0};
    std::jthread waiter([&] {
      try {
        auto w = track(*q, n, Wait::for_duration(lease() * 4));
        if (w) {
          granted = true;
          waiter_token = w->token();
          w->release();
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "waiter: " << e.what();
      }
    });
    std::this_thread::sleep_for(milliseconds(200));
    ASSERT_NO_THROW(env().stop_member(i));
    std::this_thread::sleep_for(lease());  // a whole S without member i
    EXPECT_FALSE(h->lost_ns()) << "losing member " << i << " fired the lost signal";
    EXPECT_FALSE(granted.load()) << "the waiter was granted while the lock was held";
    ASSERT_NO_THROW(env().start_member(i));
    EXPECT_TRUE(h->release()) << "release after losing member " << i;
    waiter.join();
    EXPECT_TRUE(granted.load()) << "the waiter was not served after losing member " << i;
    EXPECT_GT(waiter_token.load(), last);
    last = waiter_token.load();
  }
  EXPECT_TRUE(eventually([&] { return env().residue().empty(); }, lease()));
}

// Two of three members gone: nobody can confirm the session, so the holder is told within
// the bound; once the quorum is back, the name is free (the hold's node was deleted or its
// session expired) and tokens still increase.
TEST_P(Ensemble, QuorumLossFiresLostThenTheNameIsFreeAgain) {
  DLOCK_REQUIRE_CLAIM(ensemble);
  ASSERT_GE(env().members(), 3);
  auto p = open();
  const auto n = name();
  auto h = track(*p, n, Wait::try_once());
  ASSERT_TRUE(h);
  const auto bound = p->capabilities().lost_signal_bound;
  ASSERT_NO_THROW(env().stop_member(0));
  ASSERT_NO_THROW(env().stop_member(1));  // returns once the process is gone: no quorum now
  const auto start = Clock::now();
  EXPECT_TRUE(eventually([&] { return h->lost_ns().has_value(); }, bound + tol()))
      << "no lost signal within " << bound.count() << " ms of losing the quorum";
  std::cout << "[conformance] " << ctx().backend << " lost signal " << ms_since(start)
            << " ms after the second member was gone (bound " << bound.count() << " ms)\n";
  ASSERT_NO_THROW(env().start_member(0));
  ASSERT_NO_THROW(env().start_member(1));
  auto other = open();
  auto again = track(*other, n, Wait::for_duration(bound * 2 + tol()));
  ASSERT_TRUE(again) << "the name stayed blocked after the quorum came back";
  EXPECT_GT(again->token(), h->token());
  EXPECT_TRUE(again->release());
}

}  // namespace dlock::conformance
