// Integration tests of mode=lease against the test server: NOTIFY wake-ups, durability
// across a restart, names that only differ after a NUL.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "dlock/open.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::shared_ptr<ILockProvider> open_lease(const std::string& tag) {
  return dlock::open(test::uri_as("", "mode=lease&lease=5s&prefix=" + tag + ":&application_name=" + tag +
                                          "&connect_timeout=500ms&command_timeout=2s"));
}

TEST(PgLease, ReleaseWakesTheWaiterThroughNotify) {
  const auto tag = test::fresh_tag();
  auto p = open_lease(tag);
  auto q = open_lease(tag);
  auto held = p->try_lock("n");
  ASSERT_TRUE(held);
  std::optional<Lease> got;
  Clock::time_point granted;
  // A jthread: if release() throws (the server went away), unwinding joins the waiter and
  // the test fails with the exception instead of aborting the whole binary.
  std::jthread t([&] {
    got = q->try_lock("n", Wait::for_duration(10s));
    granted = Clock::now();
  });
  std::this_thread::sleep_for(300ms);
  const auto released = Clock::now();
  EXPECT_TRUE(held->release());
  t.join();
  ASSERT_TRUE(got);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(granted - released).count();
  // Without the NOTIFY the waiter would sleep until its fallback poll (seconds) or the TTL.
  EXPECT_LT(ms, 1000) << "hand-off took " << ms << " ms";
  EXPECT_GT(got->fencing_token(), held->fencing_token());
  std::cout << "[postgres] lease hand-off " << ms << " ms after release\n";
}

TEST(PgLease, HoldsSurviveAServerRestart) {
  const auto tag = test::fresh_tag();
  auto p = open_lease(tag);
  auto q = open_lease(tag);
  auto held = p->try_lock("durable");
  ASSERT_TRUE(held);
  test::restart_server();
  EXPECT_FALSE(q->try_lock("durable")) << "a restart forgot a durable lease row";
  EXPECT_TRUE(held->release());
  auto next = q->try_lock("durable");
  ASSERT_TRUE(next);
  EXPECT_GT(next->fencing_token(), held->fencing_token());
}

TEST(PgLease, NamesDifferingAfterANulAreDistinct) {
  const auto tag = test::fresh_tag();
  auto p = open_lease(tag);
  auto q = open_lease(tag);
  auto a = p->try_lock(std::string("a\0b", 3));
  ASSERT_TRUE(a);
  EXPECT_TRUE(q->try_lock("a"));
  EXPECT_FALSE(q->try_lock(std::string("a\0b", 3)));
  auto r = q->try_lock_shared("it's \"quoted\" \\");
  ASSERT_TRUE(r);
  EXPECT_TRUE(p->try_lock_shared("it's \"quoted\" \\"));
  EXPECT_FALSE(p->try_lock("it's \"quoted\" \\", Wait::try_once(), AcquireOptions{.owner = "w"}));
}

}  // namespace
}  // namespace dlock::postgres
