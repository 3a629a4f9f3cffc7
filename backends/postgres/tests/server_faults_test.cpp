// Integration tests of a server that stops answering (every process SIGSTOPped: TCP still
// accepts, nothing answers): waits stay bounded and cancellable, and nothing is left held.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stop_token>
#include <thread>

#include "dlock/error.h"
#include "dlock/open.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using test::eventually;
using test::ms_since;

// A provider for `tag` whose statements time out after 500 ms; S stays 10 s, so a hold
// outlives the stops below.
std::shared_ptr<ILockProvider> open_patient(const std::string& tag) {
  return dlock::open(test::uri_as("", "prefix=" + tag + ":&application_name=" + tag +
                                          "&connect_timeout=500ms&command_timeout=500ms"));
}

// Two waiters queued on the server give up while it is stopped, one at its deadline, one
// cancelled: each returns within one command_timeout of giving up (README, "Bounded
// waits"), not when the server resumes (libpq 15's PQcancel waits for the server without
// bound). Once it resumes, neither has left a lock or a queued wait behind.
TEST(PgFaults, WaitersGivingUpOnAStoppedServerReturnWithinTheCommandTimeout) {
  const auto tag = test::fresh_tag();
  auto p = open_patient(tag);
  auto q = open_patient(tag);
  auto r = open_patient(tag);
  auto held = p->try_lock("frz");
  ASSERT_TRUE(held);
  // Long enough for both waiters to queue on a loaded machine before the server stops.
  constexpr std::chrono::milliseconds kWait = 3000ms;
  std::atomic<long long> timed_out_took{-1}, cancelled_took{-1};
  std::stop_source stop;
  const auto start = Clock::now();
  std::thread timed([&] {
    EXPECT_FALSE(q->try_lock("frz", Wait::for_duration(kWait)));
    timed_out_took = ms_since(start);
  });
  std::thread cancelled([&] {
    AcquireOptions o;
    o.cancel = stop.get_token();
    EXPECT_FALSE(r->try_lock("frz", Wait::forever(), o));
    cancelled_took = ms_since(start);
  });
  struct JoinAtExit {  // also when an ASSERT below returns early (a joinable thread aborts)
    std::stop_source& stop;
    std::thread& a;
    std::thread& b;
    ~JoinAtExit() {
      stop.request_stop();
      if (a.joinable()) a.join();
      if (b.joinable()) b.join();
    }
  } join_at_exit{stop, timed, cancelled};
  ASSERT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 2; }, kWait - 500ms))
      << "the waiters did not queue on the server";
  {
    test::StoppedServer stopped;
    std::this_thread::sleep_for(kWait - (Clock::now() - start));
    stop.request_stop();
    // Resumed after 8 s at the latest: a waiter still blocked then returns only now.
    EXPECT_TRUE(eventually([&] { return timed_out_took >= 0 && cancelled_took >= 0; }, 8000ms));
  }
  timed.join();
  cancelled.join();
  const long long bound = (kWait + 500ms + 400ms).count();  // the wait + command_timeout + slack
  EXPECT_LT(timed_out_took.load(), bound) << "the timed-out waiter";
  EXPECT_LT(cancelled_took.load(), bound) << "the cancelled waiter";
  EXPECT_TRUE(eventually([&] { return test::advisory_locks_of(tag, /*granted=*/false) == 0; }, 3000ms))
      << "a waiter stayed queued";
  EXPECT_EQ(test::advisory_locks_of(tag, /*granted=*/true), 1) << "only the holder's lock";
  EXPECT_TRUE(held->release());
  auto again = q->try_lock("frz", Wait::for_duration(2s));
  EXPECT_TRUE(again) << "the name stayed held";
}

}  // namespace
}  // namespace dlock::postgres
