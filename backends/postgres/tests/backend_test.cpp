// Integration tests of advisory mode against the test server: loss detection, restarts,
// names, clean-up of waiters, session sharing, key collisions, server-side timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <optional>
#include <set>
#include <stop_token>
#include <thread>

#include "dlock/error.h"
#include "dlock/open.h"
#include "keys.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::open_tagged;

using test::eventually;
using test::ms_since;

TEST(PgAdvisory, TerminatedHolderSessionFiresLostAtOnce) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);
  auto a = p->try_lock("victim");
  auto b = p->try_lock("bystander");  // multiplexed on the same session: lost with it
  ASSERT_TRUE(a && b);
  std::this_thread::sleep_for(100ms);  // the sessions are idle and watched
  ASSERT_GE(test::terminate_holders(tag), 1);
  const auto start = Clock::now();
  EXPECT_TRUE(eventually([&] { return a->lost_token().stop_requested(); }, 900ms));
  const auto after = ms_since(start);
  std::cout << "[postgres] lost signal " << after << " ms after pg_terminate_backend returned\n";
  EXPECT_LT(after, 100) << "lost signal " << after << " ms after pg_terminate_backend";
  EXPECT_TRUE(eventually([&] { return b->lost_token().stop_requested(); }, 200ms));
  EXPECT_FALSE(a->release());
  auto again = open_tagged(tag)->try_lock("victim");
  EXPECT_TRUE(again);
  EXPECT_GT(again->fencing_token(), a->fencing_token());
}

TEST(PgAdvisory, RestartWhileHoldingAndWaiting) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);
  auto q = open_tagged(tag);
  auto held = p->try_lock("r");
  ASSERT_TRUE(held);
  const auto first_token = held->fencing_token();
  std::optional<Lease> waited;
  std::exception_ptr waiter_error;
  std::thread waiter([&] {
    try {
      waited = q->try_lock("r", Wait::for_duration(20s));
    } catch (...) {
      waiter_error = std::current_exception();
    }
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(test::advisory_locks_of(tag, /*granted=*/false), 1) << "the waiter is queued on the server";
  const auto start = Clock::now();
  test::restart_server();
  EXPECT_TRUE(held->lost_token().stop_requested()) << "a restart must fire the lost signal";
  (void)start;
  waiter.join();
  ASSERT_FALSE(waiter_error) << "the waiter retries while the server restarts";
  ASSERT_TRUE(waited) << "the waiter gets the lock once the server is back";
  EXPECT_GT(waited->fencing_token(), first_token) << "tokens increase across a restart";
  EXPECT_FALSE(held->release());
  EXPECT_TRUE(waited->release());
}

TEST(PgAdvisory, AwkwardNamesAreDistinctLocks) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);
  auto q = open_tagged(tag);
  const std::vector<std::string> names = {
      "it's", "back\\slash", "quote\"d", std::string("nul\0byte", 8), "nul",
      "\xe2\x9c\x93 unicode \xf0\x9f\x94\x92", std::string(1024, 'x'), "'); DROP TABLE dlock_fence; --"};
  std::vector<Lease> held;
  for (const auto& n : names) {
    auto l = p->try_lock(n);
    ASSERT_TRUE(l) << "name of " << n.size() << " bytes";
    EXPECT_FALSE(q->try_lock(n)) << "another provider got a held name";
    held.push_back(std::move(*l));
  }
  try {
    (void)p->try_lock(std::string(4096, 'y'));
    ADD_FAILURE() << "a 4 KB name was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
  for (auto& l : held) EXPECT_TRUE(l.release());
  EXPECT_EQ(test::advisory_locks_of(tag, true), 0);
  EXPECT_EQ(test::admin("SELECT count(*) FROM pg_tables WHERE tablename = 'dlock_fence'")[0][0], "1");
}

TEST(PgAdvisory, TimedOutAndCancelledWaitersLeaveNothing) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);
  auto q = open_tagged(tag);
  auto held = p->try_lock("w");
  ASSERT_TRUE(held);
  const auto start = Clock::now();
  EXPECT_FALSE(q->try_lock("w", Wait::for_duration(300ms)));
  EXPECT_LT(ms_since(start), 300 + 500);
  std::stop_source stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
  });
  AcquireOptions o;
  o.cancel = stop.get_token();
  EXPECT_FALSE(q->try_lock("w", Wait::for_duration(10s), o));
  canceller.join();
  EXPECT_EQ(test::advisory_locks_of(tag, /*granted=*/false), 0) << "a waiter stayed queued";
  EXPECT_EQ(test::advisory_locks_of(tag, /*granted=*/true), 1) << "only the holder's lock";
  EXPECT_EQ(test::admin("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + tag +
                        "' AND query ILIKE 'LISTEN%'")[0][0],
            "0");
  EXPECT_TRUE(held->release());
  EXPECT_EQ(test::advisory_locks_of(tag, true), 0);
}

// A waiter queued on the server that reaches its deadline must leave the queue then, by
// itself: not by a cancel request, which is a new connection the postmaster forks a process
// for (tens to hundreds of milliseconds on a loaded host). While such a cancel is on its
// way the FIFO queue hands a released lock to the leaving waiter, a "ghost" grant that
// nobody uses and that keeps everyone else out until the cancel returns. The waiter here
// connects through a proxy that holds new connections back for 3 s once it is queued: a
// waiter that needs one returns a command_timeout (1 s) late, and the lock released 600 ms
// after its deadline goes to it instead of to the next try.
TEST(PgAdvisory, AWaiterAtItsDeadlineLeavesTheQueueWithoutACancel) {
  const auto tag = test::fresh_tag();
  test::Proxy proxy;
  auto p = open_tagged(tag);
  auto q = dlock::open(proxy.uri("prefix=" + tag + ":&application_name=" + tag +
                                 "&session_timeout=2s&connect_timeout=1s&command_timeout=1s"));
  auto held = p->try_lock("ghost");
  ASSERT_TRUE(held);
  constexpr auto kWait = 400ms;
  std::atomic<long long> took{-1};
  const auto start = Clock::now();
  std::jthread waiter([&] {
    const auto t0 = Clock::now();
    EXPECT_FALSE(q->try_lock("ghost", Wait::for_duration(kWait)));
    took = ms_since(t0);
  });
  ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 1; }, kWait - 100ms))
      << "the waiter did not queue on the server";
  const int connections = proxy.accepted();
  proxy.delay_new(3s);
  std::this_thread::sleep_until(start + kWait + 600ms);
  EXPECT_TRUE(held->release());
  auto next = p->try_lock("ghost");  // right after the release: nobody else wants the lock
  EXPECT_TRUE(next) << "the lock went to the waiter that had timed out 600 ms before (a ghost grant)";
  waiter.join();
  std::cout << "[postgres] a waiter timing out after " << kWait.count() << " ms returned after " << took
            << " ms, opening " << proxy.accepted() - connections << " connection(s) meanwhile\n";
  EXPECT_LT(took.load(), (kWait + 250ms).count()) << "the wait plus one round trip (and slack)";
  EXPECT_EQ(proxy.accepted() - connections, 0) << "giving up at the deadline opened a connection (a cancel)";
  if (next) {
    EXPECT_TRUE(next->release());
  }
  EXPECT_TRUE(eventually([&] { return test::advisory_locks_of(tag, true) + test::advisory_locks_of(tag, false) == 0; },
                         2s))
      << "a lock or a queued wait stayed behind";
}

TEST(PgAdvisory, ReleaseOnTheChunkBoundaryLeavesNoStrayLock) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag, "&wait_chunk=100ms");
  auto q = open_tagged(tag, "&wait_chunk=100ms");
  for (int i = 0; i < 15; ++i) {
    auto held = p->try_lock("chunk");
    ASSERT_TRUE(held);
    std::optional<Lease> got;
    std::thread waiter([&] { got = q->try_lock("chunk", Wait::for_duration(2s)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 7 * i));  // around the chunk ends
    EXPECT_TRUE(held->release());
    waiter.join();
    ASSERT_TRUE(got) << "iteration " << i;
    EXPECT_GT(got->fencing_token(), held->fencing_token());
    EXPECT_TRUE(got->release());
    EXPECT_TRUE(eventually([&] { return test::advisory_locks_of(tag, true) == 0; }, 500ms))
        << "a stray advisory lock after iteration " << i;
  }
}

// A waiter blocked in the server holds a snapshot, and with it backend_xmin, the horizon
// below which VACUUM may not remove rows. Chunked waits (wait_chunk) end every statement
// and start a fresh one, so the horizon follows the transactions that finished meanwhile.
TEST(PgAdvisory, ForeverWaiterDoesNotPinXmin) {
  const auto tag = test::fresh_tag();
  auto holder = open_tagged(tag);
  auto waiter = open_tagged(tag, "&wait_chunk=300ms");
  auto held = holder->try_lock("standby-leader");
  ASSERT_TRUE(held);
  std::optional<Lease> got;
  std::thread t([&] { got = waiter->try_lock("standby-leader", Wait::for_duration(6s)); });
  const std::string waiting_xmin =
      "SELECT backend_xmin::text::bigint FROM pg_stat_activity WHERE application_name = '" + tag +
      "' AND wait_event_type = 'Lock' AND backend_xmin IS NOT NULL";
  ASSERT_TRUE(eventually([&] { return !test::admin(waiting_xmin).empty(); }, 2s)) << "the waiter never queued";
  const auto first = std::stoll(test::admin(waiting_xmin)[0][0]);
  // Transactions that finish while the waiter waits (each admin() call commits one xid).
  const auto mark = std::stoll(test::admin("SELECT txid_current()")[0][0]);
  std::set<long long> seen{first};
  long long last = first;
  const auto start = Clock::now();
  while (Clock::now() - start < 2s) {
    (void)test::admin("SELECT txid_current()");
    auto rows = test::admin(waiting_xmin);
    if (!rows.empty()) {
      last = std::stoll(rows[0][0]);
      seen.insert(last);
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GT(last, mark) << "2 s (~6 wait chunks) after xid " << mark
                        << " finished, the waiter's backend_xmin is still " << last;
  EXPECT_GE(seen.size(), 3u) << "backend_xmin moved " << seen.size() - 1 << " times in 2 s";
  EXPECT_TRUE(held->release());
  t.join();
  ASSERT_TRUE(got) << "the chunked waiter was not granted";
  EXPECT_TRUE(got->release());
}

TEST(PgAdvisory, TwoOwnersOfOneProviderNeverShareASession) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);
  AcquireOptions a, b;
  a.owner = "owner-a";
  b.owner = "owner-b";
  auto ra = p->try_lock_shared("s", Wait::try_once(), a);
  ASSERT_TRUE(ra);
  // On one session the exclusive try would succeed on top of the shared hold (stacking).
  EXPECT_FALSE(p->try_lock("s", Wait::try_once(), b));
  auto rb = p->try_lock_shared("s", Wait::try_once(), b);
  ASSERT_TRUE(rb);
  auto pids = test::admin(
      "SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
      "WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = '" + tag + "'");
  EXPECT_EQ(pids[0][0], "2");
  EXPECT_TRUE(ra->release());
  EXPECT_FALSE(p->try_lock("s", Wait::try_once(), a)) << "b still holds it shared";
  EXPECT_TRUE(rb->release());
  EXPECT_TRUE(p->try_lock("s", Wait::try_once(), a));
}

// Shared holds of one name need a session each: with `pool` readers holding it, one more
// reader who will wait polls until one of them leaves (a try-once cannot tell full from
// busy: unavailable), and a wait that ends unserved is a plain timeout, not an error.
TEST(PgAdvisory, MoreReadersThanThePoolWaitForASession) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag, "&pool=2");
  auto r1 = p->try_lock_shared("r", Wait::try_once(), AcquireOptions{.owner = "reader-1"});
  auto r2 = p->try_lock_shared("r", Wait::try_once(), AcquireOptions{.owner = "reader-2"});
  ASSERT_TRUE(r1 && r2);
  const AcquireOptions third{.owner = "reader-3"};
  try {
    (void)p->try_lock_shared("r", Wait::try_once(), third);
    ADD_FAILURE() << "a try-once found a session that does not hold the name";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  try {
    const auto start = Clock::now();
    EXPECT_FALSE(p->try_lock_shared("r", Wait::for_duration(300ms), third));
    EXPECT_LT(ms_since(start), 300 + 500);
  } catch (const Error& e) {
    ADD_FAILURE() << "a waiting reader failed instead of timing out: " << e.what();
  }
  std::optional<Lease> got;
  std::optional<Error> error;
  std::thread reader([&] {
    try {
      got = p->try_lock_shared("r", Wait::for_duration(3s), third);
    } catch (const Error& e) {
      error = e;
    }
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(r1->release());
  reader.join();
  EXPECT_FALSE(error) << error->what();
  ASSERT_TRUE(got) << "the waiting reader was not granted when a session freed the name";
  EXPECT_TRUE(got->release());
  EXPECT_TRUE(r2->release());
}

// Holds share sessions, so a hold that runs out on the client's timer (an explicit lease,
// max_hold) must give up its own advisory lock only: closing the session would take every
// other hold on it away on the server while they are still renewed.
void expect_only_the_ended_hold_freed(const AcquireOptions& ending) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);
  auto steady = p->try_lock("steady", Wait::try_once(), AcquireOptions{.owner = "steady-owner"});
  ASSERT_TRUE(steady);
  auto ends = p->try_lock("ends", Wait::try_once(), ending);
  ASSERT_TRUE(ends);
  auto pids = test::admin(
      "SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
      "WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = '" + tag + "'");
  ASSERT_EQ(pids[0][0], "1") << "the two holds are not on one session: nothing to test";
  ASSERT_TRUE(eventually([&] { return ends->lost_token().stop_requested(); }, 1500ms));
  auto q = open_tagged(tag);
  // The ended hold is freed on the server (at its end, owner-checked)...
  EXPECT_TRUE(q->try_lock("ends", Wait::for_duration(1s))) << "the ended hold was not freed";
  // ...and nothing else: the steady hold is neither lost nor free for another owner, for
  // longer than S (1 s here), so its session is still probed.
  std::this_thread::sleep_for(1200ms);
  EXPECT_FALSE(steady->lost_token().stop_requested()) << "an unrelated hold on the session was lost";
  EXPECT_TRUE(steady->held());
  EXPECT_FALSE(q->try_lock("steady")) << "another provider got a name still held";
  EXPECT_TRUE(steady->release());
  EXPECT_TRUE(q->try_lock("steady"));
}

TEST(PgAdvisory, AnExplicitLeaseRunningOutFreesOnlyItsHold) {
  AcquireOptions o;
  o.owner = "leased-owner";
  o.lease = 400ms;
  expect_only_the_ended_hold_freed(o);
}

TEST(PgAdvisory, MaxHoldRunningOutFreesOnlyItsHold) {
  AcquireOptions o;
  o.owner = "capped-owner";
  o.max_hold = 400ms;
  expect_only_the_ended_hold_freed(o);
}

// Every name's first candidate key is the same: collisions are the rule.
std::int64_t colliding_key(std::string_view identity, int index) {
  return index == 0 ? 0x5eed : sha256_key(identity, index);
}

TEST(PgAdvisory, ForcedCollisionNeitherExcludesNorDoubleGrants) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);  // creates the fence table if this test runs first
  auto q = open_tagged(tag);
  test::admin("DELETE FROM dlock_fence WHERE key = " + std::to_string(0x5eed));
  set_key_function_for_testing(colliding_key);
  {
    auto a = p->try_lock("alpha");  // owns key 0x5eed from now on
    ASSERT_TRUE(a);
    auto b = q->try_lock("beta");  // same first key, held by alpha: must not be refused
    ASSERT_TRUE(b) << "a collision silently excluded another name";
    EXPECT_FALSE(q->try_lock("alpha")) << "alpha granted twice";
    EXPECT_FALSE(p->try_lock("beta", Wait::try_once(), AcquireOptions{.owner = "x"})) << "beta granted twice";
    EXPECT_TRUE(a->release());
    // alpha free: beta's key 0 is free too, but beta must still land on its own key.
    auto b2 = p->try_lock("beta", Wait::for_duration(100ms), AcquireOptions{.owner = "y"});
    EXPECT_FALSE(b2) << "beta granted twice after alpha left";
    auto a2 = q->try_lock("alpha", Wait::for_duration(300ms), AcquireOptions{.owner = "z"});
    EXPECT_TRUE(a2);
    // A waiter of beta queued on the key alpha holds would be a silent exclusion too.
    std::optional<Lease> b3;
    std::thread t([&] { b3 = p->try_lock("beta", Wait::for_duration(2s), AcquireOptions{.owner = "w"}); });
    std::this_thread::sleep_for(200ms);
    EXPECT_TRUE(b->release());
    t.join();
    EXPECT_TRUE(b3) << "beta's waiter was not granted when beta was released";
  }
  auto owners = test::admin("SELECT encode(name, 'escape') FROM dlock_fence WHERE key = " + std::to_string(0x5eed));
  set_key_function_for_testing(nullptr);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0][0], tag + ":\\000alpha");
}

TEST(PgAdvisory, ServerSideTimeoutsDoNotCutWaits) {
  test::admin("DO $$ BEGIN CREATE ROLE dlock_st LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  test::admin("ALTER ROLE dlock_st SET statement_timeout = '100ms'");
  test::admin("ALTER ROLE dlock_st SET lock_timeout = '100ms'");
  test::admin("ALTER ROLE dlock_st SET idle_session_timeout = '150ms'");
  const auto tag = test::fresh_tag();
  auto holder = open_tagged(tag);
  test::admin("GRANT ALL ON TABLE dlock_fence TO dlock_st");
  test::admin("GRANT ALL ON SEQUENCE dlock_fence_token TO dlock_st");
  auto waiter = dlock::open(test::uri_as("dlock_st", "prefix=" + tag + ":&application_name=" + tag +
                                                         "&session_timeout=2s&create_tables=false"));
  auto held = holder->try_lock("t");
  ASSERT_TRUE(held);
  std::optional<Lease> got;
  std::thread t([&] { got = waiter->try_lock("t", Wait::for_duration(3s)); });
  std::this_thread::sleep_for(700ms);
  EXPECT_TRUE(held->release());
  t.join();
  ASSERT_TRUE(got) << "the role's statement_timeout/lock_timeout cut the wait";
  std::this_thread::sleep_for(600ms);  // > the role's idle_session_timeout
  EXPECT_TRUE(got->held()) << "the role's idle_session_timeout ended the session";
  EXPECT_TRUE(got->release());
}

}  // namespace
}  // namespace dlock::postgres
