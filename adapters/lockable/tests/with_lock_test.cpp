// dlock::with_lock, the declarative guard, on mem://.
#include "dlock/adapters/with_lock.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "dlock/dlock.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

TEST(WithLock, ReturnsTheResultAndReleases) {
  auto p = open("mem://with-result");
  std::string id = "42";
  std::uint64_t token = 0;
  int r = with_lock(*p, {.key = "order:" + id, .lease = 10s, .wait = Wait::for_duration(2s)}, [&](const Lease& l) {
    token = l.fencing_token();
    EXPECT_TRUE(l.held());
    return 7;
  });
  EXPECT_EQ(r, 7);
  EXPECT_NE(token, 0u);
  std::thread other([&] { EXPECT_TRUE(p->try_lock("order:42").has_value()); });
  other.join();
}

TEST(WithLock, AcceptsWorkWithoutLeaseAndVoidWork) {
  auto p = open("mem://with-void");
  bool ran = false;
  with_lock(*p, {.key = "k"}, [&] { ran = true; });
  EXPECT_TRUE(ran);
  std::string s = with_lock(*p, {.key = "k"}, [] { return std::string("done"); });
  EXPECT_EQ(s, "done");
}

TEST(WithLock, ThrowsTimedOutWhenHeldElsewhere) {
  auto p = open("mem://with-timeout");
  auto held = p->try_lock("busy");
  ASSERT_TRUE(held);
  std::thread other([&] {
    bool ran = false;
    auto start = std::chrono::steady_clock::now();
    try {
      with_lock(*p, {.key = "busy", .wait = Wait::for_duration(100ms)}, [&] { ran = true; });
      ADD_FAILURE() << "expected timed_out";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::timed_out);
    }
    EXPECT_FALSE(ran);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  });
  other.join();
}

TEST(WithLock, TryOnceDoesNotWait) {
  auto p = open("mem://with-try-once");
  auto held = p->try_lock("busy");
  ASSERT_TRUE(held);
  std::thread other([&] {
    auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(with_lock(*p, {.key = "busy", .wait = Wait::try_once()}, [] {}), Error);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  });
  other.join();
  EXPECT_EQ(with_lock(*p, {.key = "free", .wait = Wait::try_once()}, [] { return 7; }), 7);
}

TEST(WithLock, AnExceptionFromTheWorkPropagatesAndReleases) {
  auto p = open("mem://with-throw");
  EXPECT_THROW(with_lock(*p, {.key = "k"}, []() -> int { throw std::logic_error("boom"); }), std::logic_error);
  std::thread other([&] { EXPECT_TRUE(p->try_lock("k").has_value()); });
  other.join();
}

TEST(WithLock, ReportsALockLostDuringTheWork) {
  auto p = open("mem://with-lost");
  try {
    with_lock(*p, {.key = "k", .max_hold = 50ms}, [](const Lease& l) {
      auto deadline = std::chrono::steady_clock::now() + 3s;
      while (!l.lost_token().stop_requested() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
      }
    });
    FAIL() << "expected lock_lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::lock_lost);
  }
}

TEST(WithLock, RejectsAnEmptyKey) {
  auto p = open("mem://with-empty");
  try {
    with_lock(*p, {.key = ""}, [] {});
    FAIL() << "expected invalid_argument";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

}  // namespace
}  // namespace dlock
