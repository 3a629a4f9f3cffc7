// The core's handling of session backends and of holds it gives up, against a scripted
// backend: two expiries, probes every S/3, clean-up of losses the backend reports and of
// late renewals, fan-out of one session's end, the per-acquire object.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "dlock/dlock.h"
#include "dlock/spi/backend_provider.h"
#include "eventually.h"
#include "scripted_backend.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using testing::ScriptedBackend;
using Clock = std::chrono::steady_clock;
using testing::eventually;

std::shared_ptr<ILockProvider> provider_on(const std::shared_ptr<ScriptedBackend>& b) {
  return spi::make_provider(b, "scripted://");
}

// An explicit lease longer than S must not hide the server's own bound: a cut-off holder is
// told before S, not when its 60 s lease ends.
TEST(Session, ExplicitLeaseDoesNotOverrideTheServerBound) {
  auto b = std::make_shared<ScriptedBackend>(300ms, Liveness::session);
  auto p = provider_on(b);
  auto l = p->try_lock("a", Wait::try_once(), {.lease = 60s});
  ASSERT_TRUE(l);
  EXPECT_LE(l->expires_at(), Clock::now() + 300ms) << "the S-based estimate was overwritten";
  b->answer = spi::RenewStatus::failed;  // the session stops answering
  auto start = Clock::now();
  ASSERT_TRUE(eventually([&] { return l->lost_token().stop_requested(); }, 2s));
  EXPECT_LT(Clock::now() - start, 300ms) << "told after the server could have freed the lock";
}

// Session holds are probed every S/3 with an explicit lease and after Lease::extend.
TEST(Session, ProbedEveryThirdOfSWithExplicitLeaseAndAfterExtend) {
  auto b = std::make_shared<ScriptedBackend>(300ms, Liveness::session);
  auto p = provider_on(b);
  auto l = p->try_lock("a", Wait::try_once(), {.lease = 5s});
  ASSERT_TRUE(l);
  std::this_thread::sleep_for(650ms);
  auto before_extend = b->renewal_count();
  EXPECT_GE(before_extend, 4u) << "an explicit lease stopped the session probes";
  l->extend(10s);
  std::this_thread::sleep_for(650ms);
  EXPECT_GE(b->renewal_count() - before_extend, 4u) << "extend() stopped the session probes";
  EXPECT_TRUE(l->held());
  // Every probe asked for S, never for the caller's lease.
  std::lock_guard guard(b->mu);
  for (auto& r : b->renewals) EXPECT_EQ(r.lease, 300ms);
}

// The client's lease ends the hold when it is the earlier of the two: released on the
// backend at its end.
TEST(Session, ClientLeaseShorterThanSIsReleasedOnTheBackendWhenItEnds) {
  auto b = std::make_shared<ScriptedBackend>(2s, Liveness::session);
  auto p = provider_on(b);
  auto l = p->try_lock("a", Wait::try_once(), {.lease = 200ms});
  ASSERT_TRUE(l);
  ASSERT_TRUE(eventually([&] { return b->releases_of("a") == 1; }, 1s));
  EXPECT_TRUE(l->lost_token().stop_requested());
  EXPECT_FALSE(b->held("a"));
}

// A loss the backend reports is given up by the core and released on the backend once, so
// that a resumed session does not keep the lock for the provider's lifetime.
TEST(Session, LossReportedByTheBackendIsReleasedOnce) {
  auto b = std::make_shared<ScriptedBackend>(30s, Liveness::session);
  auto p = provider_on(b);
  auto l = p->try_lock("a", Wait::try_once());
  ASSERT_TRUE(l);
  b->session.mark_all_lost();
  EXPECT_TRUE(l->lost_token().stop_requested());
  ASSERT_TRUE(eventually([&] { return b->releases_of("a") == 1; }, 1s))
      << "the core never released a hold the backend marked lost";
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(l->release());
  EXPECT_EQ(b->releases_of("a"), 1u) << "released more than once";
  EXPECT_FALSE(b->held("a"));
}

// A session that ended frees its locks on the server from then on: a holder bounding its
// work by expires_at() (`dlock run` does, to kill CMD) must see that end now, not S later.
TEST(Session, SessionEndMakesEveryHoldExpireNow) {
  auto b = std::make_shared<ScriptedBackend>(30s, Liveness::session);
  auto p = provider_on(b);
  auto l = p->try_lock("a", Wait::try_once());
  ASSERT_TRUE(l);
  ASSERT_GT(l->expires_at(), Clock::now() + 20s);
  b->session.mark_all_lost();
  ASSERT_TRUE(l->lost_token().stop_requested());
  EXPECT_LE(l->expires_at(), Clock::now()) << "a lost session lock still looks held for S";
}

// One session's end reaches every hold on it at once.
TEST(Session, SessionEndFiresEveryHoldAtOnce) {
  auto b = std::make_shared<ScriptedBackend>(30s, Liveness::session);
  auto p = provider_on(b);
  std::vector<Lease> leases;
  for (const char* n : {"a", "b", "c"}) leases.push_back(*p->try_lock(n, Wait::try_once()));
  EXPECT_EQ(b->session.mark_all_lost(), 3u);
  for (auto& l : leases) EXPECT_TRUE(l.lost_token().stop_requested());
  for (const char* n : {"a", "b", "c"}) {
    EXPECT_TRUE(eventually([&] { return b->releases_of(n) == 1; }, 1s)) << n;
  }
  // A grant racing with the session's end is lost at once.
  auto late = std::make_shared<spi::HeldLock>("d", LockMode::exclusive, "o", 1, Clock::now() + 1s);
  b->session.add(late);
  EXPECT_TRUE(late->lost());
}

// A renewal whose reply comes after the core gave the hold up (a stalled server) re-arms a
// lease nobody holds: the core releases it again once that reply is in.
TEST(Session, LateRenewalAfterGiveUpIsReleased) {
  auto b = std::make_shared<ScriptedBackend>(300ms, Liveness::lease);
  auto p = provider_on(b);
  b->renew_delay = 500ms;  // the first renewal (at 100 ms) answers at 600 ms
  auto l = p->try_lock("a", Wait::try_once());
  ASSERT_TRUE(l);
  ASSERT_TRUE(eventually([&] { return l->lost_token().stop_requested(); }, 1s));
  ASSERT_TRUE(eventually([&] { return b->renewal_count() >= 1; }, 2s));
  Clock::time_point renewed_at;
  {
    std::lock_guard guard(b->mu);
    renewed_at = b->renewals.front().at;
  }
  ASSERT_TRUE(eventually([&] {
    std::lock_guard guard(b->mu);
    for (auto& r : b->releases) {
      if (r.at >= renewed_at) return true;
    }
    return false;
  }, 2s)) << "the lease the late renewal re-armed was never released";
  EXPECT_FALSE(b->held("a"));
}

// The holder is done with a lost lock (dropped its Lease, e.g. before exiting): the core
// releases it on the backend at once instead of waiting for its lease to end.
TEST(Session, DroppingALostLeaseReleasesItAtOnce) {
  auto b = std::make_shared<ScriptedBackend>(3s, Liveness::lease);
  auto p = provider_on(b);
  b->answer = spi::RenewStatus::failed;
  auto l = p->try_lock("a", Wait::try_once(), {.lease = 400ms});
  ASSERT_TRUE(l);
  ASSERT_TRUE(eventually([&] { return l->lost_token().stop_requested(); }, 2s));
  auto told = Clock::now();
  EXPECT_FALSE(l->release());
  EXPECT_EQ(b->releases_of("a"), 1u);
  EXPECT_LT(Clock::now() - told, 100ms);
  EXPECT_FALSE(b->held("a"));
}

// One Acquisition per acquire call, abandoned (destroyed without a grant) when the wait
// times out or is cancelled, kept until the grant otherwise; a release wakes a waiter.
TEST(Session, PerAcquireObjectIsAbandonedOnTimeoutAndCancel) {
  auto b = std::make_shared<ScriptedBackend>(30s, Liveness::session);
  auto p = provider_on(b);
  auto holder = p->try_lock("a", Wait::try_once());
  ASSERT_TRUE(holder);
  std::thread other([&] {
    EXPECT_FALSE(p->try_lock("a", Wait::for_duration(50ms), {.owner = std::string("w1")}));
  });
  other.join();
  EXPECT_EQ(b->acquisitions_abandoned.load(), 1);
  std::stop_source cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(50ms);
    cancel.request_stop();
  });
  EXPECT_FALSE(p->try_lock("a", Wait::forever(), {.owner = std::string("w2"), .cancel = cancel.get_token()}));
  canceller.join();
  EXPECT_EQ(b->acquisitions_abandoned.load(), 2);
  // A waiter is woken by the release (its fallback poll is a day).
  std::optional<Lease> got;
  auto start = Clock::now();
  std::thread waiter([&] { got = p->try_lock("a", Wait::for_duration(5s), {.owner = std::string("w3")}); });
  std::this_thread::sleep_for(50ms);
  holder->release();
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(b->acquisitions_granted.load(), 2);
}

// A transient `unavailable` while waiting is retried until the deadline; a server that
// stays unavailable is reported as unavailable once the wait is over (not as a time-out).
TEST(Session, UnavailableWhileWaitingIsRetriedUntilTheDeadline) {
  auto b = std::make_shared<ScriptedBackend>(30s, Liveness::session);
  auto p = provider_on(b);
  b->unavailable_until = Clock::now() + 200ms;
  auto l = p->try_lock("a", Wait::for_duration(2s));
  EXPECT_TRUE(l) << "a 200 ms outage failed a 2 s wait";
  b->unavailable_until = Clock::now() + 10s;
  auto start = Clock::now();
  try {
    (void)p->try_lock("b", Wait::for_duration(300ms));
    ADD_FAILURE() << "an unreachable server was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable);
  }
  EXPECT_GE(Clock::now() - start, 300ms) << "gave up before the wait was over";
  EXPECT_LT(Clock::now() - start, 1500ms);
  // A try-once fails at once.
  start = Clock::now();
  EXPECT_THROW((void)p->try_lock("c", Wait::try_once()), Error);
  EXPECT_LT(Clock::now() - start, 100ms);
}

// A backend may undo a given-up Acquisition late (its request's reply was lost, so the undo
// waits until the server answers again): that undo must never reach the grant of a later
// Acquisition of the same call. So each Acquisition has its own owner key and waiter id.
TEST(Session, EachAcquisitionOfOneCallHasItsOwnOwnerKeyAndWaiterId) {
  auto b = std::make_shared<ScriptedBackend>(30s, Liveness::session);
  auto p = provider_on(b);
  b->unavailable_until = Clock::now() + 100ms;
  auto l = p->try_lock("a", Wait::for_duration(2s));
  ASSERT_TRUE(l);
  std::lock_guard guard(b->mu);
  ASSERT_GE(b->started_ids.size(), 2u) << "no Acquisition failed: the test proves nothing";
  std::set<std::string> owners, waiters;
  for (const auto& ids : b->started_ids) {
    EXPECT_TRUE(owners.insert(ids.first).second) << "owner key used twice: " << ids.first;
    EXPECT_TRUE(waiters.insert(ids.second).second) << "waiter id used twice: " << ids.second;
  }
  ASSERT_EQ(b->owner_keys.size(), 1u);
  EXPECT_EQ(b->owner_keys.back(), b->started_ids.back().first) << "the grant is not the last Acquisition's";
}

TEST(SessionHolds, RefreshSetsEveryHoldsServerExpiry) {
  spi::SessionHolds s;
  auto a = std::make_shared<spi::HeldLock>("a", LockMode::exclusive, "o", 1, Clock::now());
  auto c = std::make_shared<spi::HeldLock>("c", LockMode::exclusive, "o", 2, Clock::now());
  s.add(a);
  s.add(c);
  auto t = Clock::now() + 5s;
  s.refresh(t);
  EXPECT_EQ(a->server_expiry(), t);
  EXPECT_EQ(c->expires_at(), t);
  c->set_client_expiry(Clock::now() + 1s);
  EXPECT_LT(c->expires_at(), t) << "expires_at is the earlier of the two";
  s.remove(*a);
  EXPECT_EQ(s.size(), 1u);
  c.reset();
  EXPECT_EQ(s.size(), 0u) << "a dropped hold stays";
}

// A Lease dropped while its release gets no answer cannot be released again by anyone: the
// core must give the hold up (released again in the background), never keep it for the next
// acquire of the same owner to re-enter. That release may have freed the lock on the server
// (its reply lost): a re-entry would then be a second holder, with the old token.
TEST(DroppedLease, AFailedReleaseFromTheDestructorIsGivenUpNotReentered) {
  for (Liveness liveness : {Liveness::lease, Liveness::session}) {
    auto b = std::make_shared<ScriptedBackend>(3s, liveness);
    auto p = provider_on(b);
    std::uint64_t first_token = 0;
    {
      auto l = p->try_lock("x", Wait::try_once());
      ASSERT_TRUE(l);
      first_token = l->fencing_token();
      b->failing_releases = 1;
    }  // ~Lease: the release throws unavailable, swallowed
    EXPECT_TRUE(eventually([&] { return b->releases_of("x") == 1; }, 2s))
        << "the given-up hold was not released again in the background";
    const int started = b->acquisitions_started.load();
    auto again = p->try_lock("x", Wait::for_duration(2s));
    ASSERT_TRUE(again);
    EXPECT_EQ(b->acquisitions_started.load(), started + 1) << "re-entered a hold whose release failed";
    EXPECT_GT(again->fencing_token(), first_token);
  }
}

}  // namespace
}  // namespace dlock
