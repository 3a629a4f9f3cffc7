// Lease RAII, reentrancy, read/write rules and the lost signal, on mem://.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock/backends/mem.h"
#include "dlock/dlock.h"
#include "dlock/duration.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

class LeaseTest : public ::testing::Test {
 protected:
  std::string space = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::shared_ptr<ILockProvider> a = open("mem://" + space);
  std::shared_ptr<ILockProvider> b = open("mem://" + space);  // another client of the same table
};

// The margin the lost signal fires before a lease's end, which dlock run also kills CMD by.
TEST(LossMargin, FivePercentAtLeast50MsAtMostAQuarter) {
  EXPECT_EQ(loss_margin(10s), 500ms);
  EXPECT_EQ(loss_margin(1s), 50ms);
  EXPECT_EQ(loss_margin(400ms), 50ms);
  EXPECT_EQ(loss_margin(100ms), 25ms);
}

TEST_F(LeaseTest, ExclusiveBetweenProvidersAndFreedByDestructor) {
  {
    auto l = a->try_lock("x");
    ASSERT_TRUE(l);
    EXPECT_TRUE(l->held());
    EXPECT_EQ(l->name(), "x");
    EXPECT_FALSE(b->try_lock("x"));
  }
  EXPECT_TRUE(b->try_lock("x"));
}

TEST_F(LeaseTest, MoveTransfersTheHold) {
  Lease outer;
  EXPECT_FALSE(outer.held());
  {
    auto l = a->try_lock("x");
    ASSERT_TRUE(l);
    outer = std::move(*l);
  }
  EXPECT_TRUE(outer.held());
  EXPECT_FALSE(b->try_lock("x"));
  Lease moved(std::move(outer));
  EXPECT_TRUE(moved.held());
  moved = Lease();  // assignment releases
  EXPECT_TRUE(b->try_lock("x"));
}

TEST_F(LeaseTest, ReleaseIsIdempotentAndNeverFiresTheLostSignal) {
  auto l = a->try_lock("x");
  ASSERT_TRUE(l);
  std::atomic<int> fired{0};
  l->on_lost([&] { ++fired; });
  EXPECT_TRUE(l->release());
  EXPECT_FALSE(l->release());
  EXPECT_FALSE(l->held());
  EXPECT_FALSE(l->lost_token().stop_requested());
  EXPECT_EQ(fired, 0);
  Lease empty;
  EXPECT_FALSE(empty.release());
  EXPECT_FALSE(empty.lost_token().stop_possible());
  EXPECT_EQ(empty.fencing_token(), 0u);
}

TEST_F(LeaseTest, FencingTokensStrictlyIncreaseAcrossHolders) {
  std::uint64_t last = 0;
  for (int i = 0; i < 100; ++i) {
    auto l = (i % 2 ? a : b)->try_lock("x");
    ASSERT_TRUE(l);
    EXPECT_GT(l->fencing_token(), last);
    last = l->fencing_token();
  }
}

TEST_F(LeaseTest, ReentrancyCountsHoldsAndSharesTheToken) {
  auto first = a->try_lock("x");
  auto second = a->try_lock("x");  // same thread: re-entry
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->fencing_token(), second->fencing_token());
  EXPECT_TRUE(first->release());
  EXPECT_FALSE(b->try_lock("x")) << "released with one hold left";
  EXPECT_TRUE(second->release());
  EXPECT_TRUE(b->try_lock("x"));
}

TEST_F(LeaseTest, OtherThreadsAndOwnersAreNotReentrant) {
  auto mine = a->try_lock("x");
  ASSERT_TRUE(mine);
  bool other_thread = true;
  std::thread([&] { other_thread = a->try_lock("x").has_value(); }).join();
  EXPECT_FALSE(other_thread);
  AcquireOptions job;
  job.owner = "job-42";
  EXPECT_FALSE(a->try_lock("x", Wait::try_once(), job));
}

TEST_F(LeaseTest, ExplicitOwnerReentersFromAnotherThread) {
  AcquireOptions job;
  job.owner = "job-42";
  auto first = a->try_lock("x", Wait::try_once(), job);
  ASSERT_TRUE(first);
  std::optional<Lease> second;
  std::thread([&] { second = a->try_lock("x", Wait::try_once(), job); }).join();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->owner(), "job-42");
}

TEST_F(LeaseTest, ReadersShareWritersExclude) {
  auto r1 = a->try_lock_shared("x");
  auto r2 = b->try_lock_shared("x");
  ASSERT_TRUE(r1 && r2);
  auto c = open("mem://" + space);  // a third client: for a or b this would be an upgrade
  EXPECT_FALSE(c->try_lock("x"));
  r1->release();
  r2->release();
  auto w = a->try_lock("x");
  ASSERT_TRUE(w);
  EXPECT_FALSE(b->try_lock_shared("x"));
}

TEST_F(LeaseTest, ReadInsideWriteIsAllowedUpgradeIsRefused) {
  auto w = a->try_lock("x");
  ASSERT_TRUE(w);
  auto r = a->try_lock_shared("x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->mode(), LockMode::shared);
  w->release();
  EXPECT_FALSE(b->try_lock_shared("x")) << "the read hold keeps the write lock";
  r->release();

  auto r2 = a->try_lock_shared("y");
  ASSERT_TRUE(r2);
  try {
    (void)a->try_lock("y");
    FAIL() << "upgrade accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::would_deadlock);
  }
}

TEST_F(LeaseTest, BrokenLockReportsNotHeldAndFiresLost) {
  auto l = a->try_lock("x", Wait::try_once(), {.lease = 10s});
  ASSERT_TRUE(l);
  std::atomic<bool> fired{false};
  l->on_lost([&] { fired = true; });
  mem::break_lock(space, "x");
  auto thief = b->try_lock("x");
  ASSERT_TRUE(thief);
  EXPECT_THROW(l->extend(10s), Error);
  EXPECT_TRUE(fired);
  EXPECT_FALSE(l->release()) << "a stale holder must not release the new holder's lock";
  EXPECT_TRUE(thief->held());
  EXPECT_FALSE(a->try_lock("x")) << "the thief still holds it";
}

// The callback runs on dlock's thread: an exception it throws must not end the process, nor
// keep the other callbacks from running.
TEST_F(LeaseTest, ALostCallbackThatThrowsNeitherAbortsNorStopsTheOthers) {
  auto l = a->try_lock("x", Wait::try_once(), {.lease = 10s});
  ASSERT_TRUE(l);
  std::atomic<int> fired{0};
  l->on_lost([] { throw std::runtime_error("stop the job"); });
  l->on_lost([&] { ++fired; });
  mem::break_lock(space, "x");
  auto thief = b->try_lock("x");
  ASSERT_TRUE(thief);
  EXPECT_THROW(l->extend(10s), Error);  // finds the loss and fires the signal
  EXPECT_TRUE(l->lost_token().stop_requested());
  EXPECT_EQ(fired, 1);
  // Registered after the loss: runs at once, on this thread, and its exception stays in dlock.
  EXPECT_NO_THROW(l->on_lost([] { throw 42; }));
}

TEST_F(LeaseTest, BadArgumentsAreInvalidArgument) {
  EXPECT_THROW((void)a->try_lock(""), Error);
  EXPECT_THROW((void)a->try_lock(std::string(4097, 'n')), Error);
  EXPECT_TRUE(a->try_lock(std::string(4096, 'n')));
  EXPECT_THROW((void)a->try_lock("x", Wait::try_once(), {.lease = 0ms}), Error);
  EXPECT_THROW((void)a->try_lock("x", Wait::try_once(), {.max_hold = -1ms}), Error);
  EXPECT_THROW((void)a->try_lock("x", Wait::try_once(), {.owner = std::string()}), Error);
  auto l = a->try_lock("x");
  ASSERT_TRUE(l);
  EXPECT_THROW(l->extend(0ms), Error);
}

// A lease is renewed every third of it: a lease of a few ms had the watchdog renewing in a
// loop without pause (100 % of a core while held). Below kShortestLease it is refused, from
// the options and from the URI.
TEST_F(LeaseTest, LeasesShorterThanTheShortestAreInvalidArgument) {
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::internal;
  };
  EXPECT_EQ(code_of([&] { (void)a->try_lock("x", Wait::try_once(), {.lease = kShortestLease - 1ms}); }),
            ErrorCode::invalid_argument);
  EXPECT_TRUE(a->try_lock("x", Wait::try_once(), {.lease = kShortestLease}));
  auto l = a->try_lock("x");
  ASSERT_TRUE(l);
  EXPECT_EQ(code_of([&] { l->extend(2ms); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { (void)open("mem://" + space + "?lease=2ms"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { (void)open("file:///tmp/dlock-shortest-lease?lease=1ms"); }), ErrorCode::invalid_argument);
}

TEST_F(LeaseTest, NamesAreBytesCaseSensitiveAndDistinct) {
  auto upper = a->try_lock("Name");
  auto lower = b->try_lock("name");
  EXPECT_TRUE(upper && lower);
  auto binary = a->try_lock(std::string("a\0b", 3));
  auto prefix = b->try_lock(std::string("a", 1));
  EXPECT_TRUE(binary && prefix);
}

// Leases and hold limits longer than every backend's time types hold (the same ~24 days
// parse_duration takes) are refused: 317 years overflowed a server-side expiry into a row
// locked for good, milliseconds::max() wrapped negative.
TEST_F(LeaseTest, LeasesBeyondTheLongestDurationAreInvalidArgument) {
  const std::chrono::milliseconds longest = std::chrono::hours(24 * 24);
  for (auto too_long : {longest + std::chrono::milliseconds(1), std::chrono::milliseconds(10'000'000'000'000),
                        std::chrono::milliseconds::max()}) {
    for (int which = 0; which < 2; ++which) {
      AcquireOptions o;
      (which == 0 ? o.lease : o.max_hold) = too_long;
      try {
        (void)a->try_lock("x", Wait::try_once(), o);
        ADD_FAILURE() << (which == 0 ? "lease " : "max_hold ") << too_long.count() << " ms accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      }
    }
  }
  auto l = a->try_lock("x", Wait::try_once(), {.lease = longest});
  ASSERT_TRUE(l) << "the longest duration itself is accepted";
  try {
    l->extend(std::chrono::milliseconds::max());
    ADD_FAILURE() << "extend accepted milliseconds::max()";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
  }
  EXPECT_TRUE(l->held());
}

}  // namespace
}  // namespace dlock

namespace dlock {
namespace {

// A provider destroyed in a forked child must not join a thread the child lacks.
TEST(ForkAndWait, ProviderCanBeDroppedInAForkedChild) {
  auto provider = open("mem://fork?lease=300ms");
  auto held = provider->try_lock("x");
  ASSERT_TRUE(held);
  pid_t child = fork();
  if (child == 0) {
    held.reset();  // nothing in the child may hang or abort
    provider.reset();
    _exit(0);
  }
  int status = -1;
  for (int i = 0; i < 500 && waitpid(child, &status, WNOHANG) == 0; ++i) usleep(10'000);
  if (waitpid(child, &status, WNOHANG) == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "child hung destroying the provider";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(held->held());
}
}  // namespace
}  // namespace dlock
