// redis:// through dlock::open and the core: URIs, failures, push hand-off, watchdog, lost
// signal, read-write and fair acquisition as users see them.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "dlock/dlock.h"
#include "keys.h"
#include "test_server.h"

namespace dlock::redis::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

ErrorCode open_error(const std::string& uri, std::string* message = nullptr) {
  try {
    dlock::open(uri);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "opened " << uri;
  return ErrorCode::internal;
}

class RedisProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(shared_uri().empty()) << kNoServerMessage;
    prefix_ = unique_prefix();
    uri_ = with_params(shared_uri(), "prefix=" + prefix_);
    raw_ = std::make_unique<Raw>(shared_uri());
    mark_dataset(*raw_, prefix_);
  }
  void TearDown() override {
    if (!raw_) return;
    Reply keys = raw_->cmd({"KEYS", prefix_ + "*"});
    for (std::size_t i = 0; keys && i < keys->elements; ++i) {
      raw_->cmd({"DEL", std::string_view(keys->element[i]->str, keys->element[i]->len)});
    }
  }
  std::shared_ptr<ILockProvider> open(const std::string& extra = "") {
    return dlock::open(extra.empty() ? uri_ : with_params(uri_, extra));
  }
  LockKeys keys(std::string_view name) const { return LockKeys(prefix_, name); }

  std::string prefix_, uri_;
  std::unique_ptr<Raw> raw_;
};

TEST_F(RedisProviderTest, ClaimsItsCapabilities) {
  auto p = open("lease=12s");
  const auto& c = p->capabilities();
  EXPECT_TRUE(c.reentrant && c.read_write && c.fair && c.fencing && c.push_wakeup);
  EXPECT_EQ(c.liveness, Liveness::lease);
  EXPECT_EQ(c.default_lease, 12s);
  EXPECT_EQ(c.lost_signal_bound, 12s);
  EXPECT_EQ(c.crash_release_bound, 12s);
  EXPECT_EQ(open()->capabilities().default_lease, 30s);
}

TEST_F(RedisProviderTest, BadUrisAreInvalidArguments) {
  EXPECT_EQ(open_error(with_params(uri_, "bogus=1")), ErrorCode::invalid_argument);
  EXPECT_EQ(open_error(with_params(uri_, "pool=0")), ErrorCode::invalid_argument);
  EXPECT_EQ(open_error("redis://127.0.0.1:16379/notadb"), ErrorCode::invalid_argument);
}

TEST_F(RedisProviderTest, UnreachableServerIsUnavailableWithinTheConnectTimeout) {
  for (const char* uri : {"redis://127.0.0.1:1?connect_timeout=300ms",
                          "redis://10.255.255.1:6379?connect_timeout=300ms"}) {
    const auto start = Clock::now();
    std::string message;
    EXPECT_EQ(open_error(uri, &message), ErrorCode::unavailable) << uri;
    EXPECT_LT(Clock::now() - start, 1500ms) << uri;
    EXPECT_NE(message.find("redis "), std::string::npos) << message;
  }
}

TEST_F(RedisProviderTest, LockExcludesOtherProvidersAndReentersForTheSameOwner) {
  auto a = open();
  auto b = open();
  auto l = a->try_lock("x");
  ASSERT_TRUE(l);
  EXPECT_GT(l->fencing_token(), 0u);
  EXPECT_FALSE(b->try_lock("x"));
  auto again = a->try_lock("x");  // same thread = same owner: re-entry
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->release());
  EXPECT_FALSE(b->try_lock("x"));
  EXPECT_TRUE(l->release());
  auto lb = b->try_lock("x");
  ASSERT_TRUE(lb);
  EXPECT_GT(lb->fencing_token(), l->fencing_token());
}

TEST_F(RedisProviderTest, ReleaseHandsOffThroughTheGrantListNotPolling) {
  auto a = open();
  auto b = open();
  auto held = a->try_lock("h");
  ASSERT_TRUE(held);
  std::atomic<long long> acquired_at{0};
  std::thread waiter([&] {
    auto l = b->try_lock("h", Wait::for_duration(10s));
    if (l) acquired_at = Clock::now().time_since_epoch().count();
  });
  std::this_thread::sleep_for(300ms);  // the waiter is blocked and asleep by now
  const auto released_at = Clock::now();
  EXPECT_TRUE(held->release());
  waiter.join();
  ASSERT_NE(acquired_at.load(), 0) << "the waiter never got the lock";
  const auto handoff = Clock::time_point(Clock::duration(acquired_at.load())) - released_at;
  EXPECT_LT(handoff, 150ms) << "hand-off took "
                            << std::chrono::duration_cast<std::chrono::milliseconds>(handoff).count()
                            << " ms: the waiter was not woken by the release";
}

TEST_F(RedisProviderTest, WatchdogRenewsTheDefaultLease) {
  auto p = open("lease=300ms");
  auto l = p->try_lock("wd");
  ASSERT_TRUE(l);
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(l->held());
  EXPECT_EQ(raw_->integer({"EXISTS", keys("wd").hold}), 1) << "the watchdog let the lease run out";
  EXPECT_LE(raw_->integer({"PTTL", keys("wd").hold}), 300);
  EXPECT_FALSE(open()->try_lock("wd"));
  EXPECT_TRUE(l->release());
}

TEST_F(RedisProviderTest, LostSignalFiresWhenTheKeyVanishes) {
  auto p = open("lease=300ms");
  auto l = p->try_lock("lost");
  ASSERT_TRUE(l);
  std::atomic<bool> called{false};
  l->on_lost([&] { called = true; });
  raw_->cmd({"DEL", keys("lost").hold});
  const auto start = Clock::now();
  while (!l->lost_token().stop_requested() && Clock::now() - start < 2s) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(l->lost_token().stop_requested());
  EXPECT_LT(Clock::now() - start, 600ms) << "lost signal later than the lease";
  EXPECT_TRUE(called.load());
  EXPECT_FALSE(l->release());
}

TEST_F(RedisProviderTest, ReadersShareWritersExclude) {
  auto a = open();
  auto b = open();
  auto r1 = a->try_lock_shared("rw");
  auto r2 = b->try_lock_shared("rw");
  ASSERT_TRUE(r1 && r2);
  EXPECT_FALSE(b->try_lock("rw", Wait::for_duration(100ms), AcquireOptions{.owner = "other"}));
  EXPECT_TRUE(r1->release());
  EXPECT_TRUE(r2->release());
  auto w = a->try_lock("rw");
  ASSERT_TRUE(w);
  EXPECT_FALSE(b->try_lock_shared("rw"));
}

TEST_F(RedisProviderTest, FairWaitersGetTheLockInArrivalOrder) {
  auto holder = open();
  auto held = holder->try_lock("fifo");
  ASSERT_TRUE(held);
  constexpr int kWaiters = 4;
  std::vector<std::shared_ptr<ILockProvider>> providers;
  for (int i = 0; i < kWaiters; ++i) providers.push_back(open());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto l = providers[i]->try_lock("fifo", Wait::for_duration(10s), AcquireOptions{.fair = true});
      if (!l) return;
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      std::this_thread::sleep_for(5ms);
      l->release();
    });
    // Wait until waiter i queued before starting the next one.
    const auto start = Clock::now();
    while (raw_->integer({"ZCARD", keys("fifo").queue}) < i + 1 && Clock::now() - start < 3s) {
      std::this_thread::sleep_for(2ms);
    }
  }
  EXPECT_TRUE(held->release());
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(raw_->integer({"EXISTS", keys("fifo").queue}), 0);
}

TEST_F(RedisProviderTest, AWaiterThatGivesUpLeavesNothingBehind) {
  auto a = open();
  auto b = open();
  auto held = a->try_lock("gone");
  ASSERT_TRUE(held);
  // Timed out, fair.
  EXPECT_FALSE(b->try_lock("gone", Wait::for_duration(150ms), AcquireOptions{.fair = true}));
  EXPECT_EQ(raw_->integer({"EXISTS", keys("gone").queue}), 0);
  // Cancelled, writer (its queue entry must go).
  std::stop_source stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(150ms);
    stop.request_stop();
  });
  const auto start = Clock::now();
  EXPECT_FALSE(b->try_lock("gone", Wait::forever(), AcquireOptions{.cancel = stop.get_token()}));
  canceller.join();
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(raw_->integer({"EXISTS", keys("gone").queue}), 0);
  EXPECT_TRUE(held->release());
}

}  // namespace
}  // namespace dlock::redis::test

namespace dlock::redis::test {
namespace {

TEST_F(RedisProviderTest, AHolderThatVanishesFreesTheLockWhenItsLeaseEnds) {
  auto a = open("lease=1s");
  auto b = open("lease=1s");
  auto held = a->try_lock("crash", Wait::try_once(), AcquireOptions{.lease = std::chrono::milliseconds(600)});
  ASSERT_TRUE(held);
  // The holder "dies": its lease is never released.
  [[maybe_unused]] auto* leaked = new Lease(std::move(*held));
  const auto start = Clock::now();
  auto l = b->try_lock("crash", Wait::for_duration(3s));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  ASSERT_TRUE(l);
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 750ms) << "the waiter did not try again when the dead holder's lease ended";
}

}  // namespace
}  // namespace dlock::redis::test
