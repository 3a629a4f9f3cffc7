// Bounded waiting, cancellation and push wake-ups, on mem://.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>

#include "dlock/dlock.h"
#include "dlock/spi/backend_provider.h"
#include "scripted_backend.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class WaitTest : public ::testing::Test {
 protected:
  std::string space = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::shared_ptr<ILockProvider> holder = open("mem://" + space);
  std::shared_ptr<ILockProvider> waiter = open("mem://" + space);
};

template <class F>
Clock::duration timed(F f) {
  auto t0 = Clock::now();
  f();
  return Clock::now() - t0;
}

// Options whose cancel token is stopped `delay` from now, by a thread joined on destruction.
class CancelledAfter {
 public:
  explicit CancelledAfter(std::chrono::milliseconds delay)
      : thread_([this, delay] {
          std::this_thread::sleep_for(delay);
          stop_.request_stop();
        }) {
    options.cancel = stop_.get_token();
  }
  ~CancelledAfter() { thread_.join(); }
  AcquireOptions options;

 private:
  std::stop_source stop_;
  std::thread thread_;
};

TEST_F(WaitTest, TryOnceAndPastDeadlineReturnAtOnce) {
  auto held = holder->try_lock("x");
  ASSERT_TRUE(held);
  EXPECT_LT(timed([&] { EXPECT_FALSE(waiter->try_lock("x")); }), 50ms);
  EXPECT_LT(timed([&] { EXPECT_FALSE(waiter->try_lock("x", Wait::for_duration(-5s))); }), 50ms);
  EXPECT_LT(timed([&] { EXPECT_FALSE(waiter->try_lock("x", Wait::until(Clock::now() - 1s))); }), 50ms);
}

TEST_F(WaitTest, DurationAndDeadlineReturnWithinTheirBound) {
  auto held = holder->try_lock("x");
  ASSERT_TRUE(held);
  auto d = timed([&] { EXPECT_FALSE(waiter->try_lock("x", Wait::for_duration(200ms))); });
  EXPECT_GE(d, 200ms);
  EXPECT_LT(d, 400ms);
  d = timed([&] { EXPECT_FALSE(waiter->try_lock("x", Wait::until(Clock::now() + 150ms))); });
  EXPECT_GE(d, 150ms);
  EXPECT_LT(d, 350ms);
}

TEST_F(WaitTest, BlockingAcquireThrowsTimedOut) {
  auto held = holder->try_lock("x");
  try {
    (void)waiter->acquire("x", LockMode::exclusive, Wait::for_duration(50ms));
    FAIL() << "acquired a held lock";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timed_out);
  }
}

TEST_F(WaitTest, InfiniteWaitEndsOnCancel) {
  auto held = holder->try_lock("x");
  CancelledAfter cancel(100ms);
  auto d = timed([&] {
    try {
      (void)waiter->lock("x", cancel.options);
      ADD_FAILURE() << "acquired a held lock";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::cancelled);
    }
  });
  EXPECT_LT(d, 300ms);
}

TEST_F(WaitTest, ReleaseWakesTheWaiterWithoutPolling) {
  auto held = holder->try_lock("x");
  ASSERT_TRUE(held);
  Clock::time_point released;
  std::thread releaser([&] {
    std::this_thread::sleep_for(100ms);
    released = Clock::now();
    held->release();
  });
  auto got = waiter->try_lock("x", Wait::for_duration(5s));
  auto woke = Clock::now();
  releaser.join();
  ASSERT_TRUE(got);
  // The fallback poll is 500 ms: only the push wake-up is this fast.
  EXPECT_LT(woke - released, 50ms);
}

TEST_F(WaitTest, TimedOutWriterLeavesNothingBehind) {
  auto reader = holder->try_lock_shared("x");
  ASSERT_TRUE(reader);
  EXPECT_FALSE(waiter->try_lock("x", Wait::for_duration(100ms)));
  // A waiting writer blocks new readers; once it gave up, readers pass again at once.
  auto other = open("mem://" + space);
  EXPECT_TRUE(other->try_lock_shared("x"));
}

TEST_F(WaitTest, WaitingWriterBlocksNewReaders) {
  auto reader = holder->try_lock_shared("x");
  ASSERT_TRUE(reader);
  std::thread writer([&] {
    auto w = waiter->try_lock("x", Wait::for_duration(5s));
    EXPECT_TRUE(w);
  });
  std::this_thread::sleep_for(100ms);
  auto other = open("mem://" + space);
  EXPECT_FALSE(other->try_lock_shared("x")) << "a new reader passed a waiting writer";
  reader->release();
  writer.join();
}

TEST_F(WaitTest, FairWaitersAreServedInArrivalOrder) {
  auto held = holder->try_lock("x");
  ASSERT_TRUE(held);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      AcquireOptions o;
      o.fair = true;
      auto l = waiter->try_lock("x", Wait::for_duration(5s), o);
      ASSERT_TRUE(l);
      std::lock_guard lock(mu);
      order.push_back(i);
    });
    std::this_thread::sleep_for(30ms);  // arrival order 0, 1, 2, 3
  }
  held->release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

// A backend that tells its waiters through wait_fd() (their reply arrives on a socket they
// read themselves) never calls wake: the wait loop must poll the descriptor, and still end
// on cancellation while it does.
TEST(WaitFd, AReadableWaitFdWakesTheWaiterAndCancelStillEndsTheWait) {
  auto b = std::make_shared<testing::ScriptedBackend>(10s, Liveness::lease);
  b->wake_through_fd = true;  // no wake() at all; the fallback poll is a day
  auto holder = spi::make_provider(b, "scripted://");
  auto p = spi::make_provider(b, "scripted://");
  auto held = holder->try_lock("x");
  ASSERT_TRUE(held);
  std::thread releaser([&] {
    std::this_thread::sleep_for(100ms);
    held->release();
  });
  auto d = timed([&] { EXPECT_TRUE(p->try_lock("x", Wait::for_duration(5s))); });
  releaser.join();
  EXPECT_LT(d, 1s) << "the readable descriptor did not wake the waiter";

  auto again = holder->try_lock("y");
  ASSERT_TRUE(again);
  CancelledAfter cancel(100ms);
  d = timed([&] { EXPECT_FALSE(p->try_lock("y", Wait::for_duration(5s), cancel.options)); });
  EXPECT_LT(d, 1s) << "cancel did not interrupt the poll";
}

// The eventfds this process has open, by descriptor.
std::set<int> open_eventfds() {
  std::set<int> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string() == "anon_inode:[eventfd]") fds.insert(std::stoi(e.path().filename().string()));
  }
  return fds;
}

// A thread's waits share one eventfd: a wait that polls its backend's descriptor makes none
// of its own (an eventfd2 and a close on every contended acquire, 2.4 us on a 2-core VM).
TEST(WaitFd, AThreadsWaitsShareOneEventfd) {
  auto b = std::make_shared<testing::ScriptedBackend>(10s, Liveness::lease);
  b->wake_through_fd = true;
  auto holder = spi::make_provider(b, "scripted://");
  auto p = spi::make_provider(b, "scripted://");
  std::set<int> kept;
  std::thread([&] {  // a thread of its own: none of its waits came before
    const std::set<int> before = open_eventfds();
    for (int i = 0; i < 3; ++i) {
      auto held = holder->try_lock("x");
      ASSERT_TRUE(held);
      std::thread releaser([&] {
        std::this_thread::sleep_for(20ms);
        held->release();
      });
      auto got = p->try_lock("x", Wait::for_duration(5s));
      releaser.join();
      ASSERT_TRUE(got);
      got->release();
      std::set<int> now = open_eventfds();
      for (int fd : before) now.erase(fd);
      if (i == 0) kept = now;
      EXPECT_EQ(now, kept) << "wait " << i << " made an eventfd of its own";
    }
  }).join();
  EXPECT_EQ(kept.size(), 1u) << "the thread keeps no eventfd between its waits";
}

// A very long wait is a wait forever, never a deadline that wrapped into the past (try once).
TEST(WaitDeadline, AHugeDurationSaturatesInsteadOfWrapping) {
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(Wait::for_duration(std::chrono::steady_clock::duration::max()).deadline_from(now),
            std::chrono::steady_clock::time_point::max());
  EXPECT_EQ(Wait::for_duration(std::chrono::hours(24 * 365 * 100)).deadline_from(now), now + std::chrono::hours(24 * 365 * 100));
}

}  // namespace
}  // namespace dlock
