// Server-side faults from issue 9 that need the server itself: a crash (kill -9 of mariadbd
// and a restart through scripts/servers.sh) must not set fencing tokens back, and a server
// whose innodb_lock_wait_timeout is shorter than a dlock wait must neither end the wait early
// nor report a grant while the lock is held.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "stopped_server.h"
#include "test_db.h"

namespace dlock::mysql::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class MysqlServerFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(server_uri().empty()) << kNoServerMessage;
    ASSERT_FALSE(servers_script().empty()) << "DLOCK_SERVERS_SCRIPT not set (eval \"$(scripts/servers.sh env)\")";
    db_ = std::make_unique<TestDb>();
  }
  std::unique_ptr<TestDb> db_;
};

TEST_F(MysqlServerFaultsTest, TokensKeepIncreasingAfterKill9AndRestart) {
  auto p = dlock::open(db_->uri("session_timeout=10s&connect_timeout=1s"));
  // Several grants first: the sequence hands out tokens from a cache of 1000 in memory, so
  // a crash loses the cache and the restarted server must continue above it.
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto l = p->try_lock("crash", Wait::try_once(), {.owner = "a"});
    ASSERT_TRUE(l);
    EXPECT_GT(l->fencing_token(), last);
    last = l->fencing_token();
    EXPECT_TRUE(l->release());
  }
  auto held = p->try_lock("crash", Wait::try_once(), {.owner = "a"});
  ASSERT_TRUE(held);
  last = held->fencing_token();
  const pid_t pid = mariadbd_pid();
  ASSERT_GT(pid, 0) << "no running mariadbd found through " << servers_script();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // The hang-up reaches the holder at once (no S = 10 s wait).
  const auto until = Clock::now() + 2s;
  while (!held->lost_token().stop_requested() && Clock::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(held->lost_token().stop_requested()) << "kill -9 of the server did not reach the holder";
  ASSERT_EQ(std::system(("timeout 120 '" + servers_script() + "' start mariadb >/dev/null 2>&1").c_str()), 0);
  EXPECT_FALSE(held->release());
  // The provider that saw the crash continues above every token handed out before it (its
  // first attempts may fail while InnoDB recovers), and so does a new one (a fresh process).
  std::optional<Lease> next;
  const auto deadline = Clock::now() + 20s;
  while (!next && Clock::now() < deadline) {
    try {
      next = p->try_lock("crash", Wait::try_once(), {.owner = "b"});
    } catch (const Error&) {
      std::this_thread::sleep_for(50ms);
    }
  }
  ASSERT_TRUE(next) << "no grant within 20 s of the restart";
  EXPECT_GT(next->fencing_token(), last);
  last = next->fencing_token();
  EXPECT_TRUE(next->release());
  auto fresh = dlock::open(db_->uri("session_timeout=10s"));
  auto l = fresh->try_lock("crash", Wait::try_once(), {.owner = "c"});
  ASSERT_TRUE(l);
  EXPECT_GT(l->fencing_token(), last);
}

// Sets GLOBAL innodb_lock_wait_timeout for the test and puts the old value back.
class GlobalLockWaitTimeout {
 public:
  GlobalLockWaitTimeout(const TestDb& db, int seconds) {
    old_ = db.query("SELECT @@GLOBAL.innodb_lock_wait_timeout").at(0);
    TestDb::run_as_root("SET GLOBAL innodb_lock_wait_timeout=" + std::to_string(seconds));
  }
  ~GlobalLockWaitTimeout() {
    try {
      TestDb::run_as_root("SET GLOBAL innodb_lock_wait_timeout=" + old_);
    } catch (...) {
    }
  }

 private:
  std::string old_;
};

// A wait of `wait` for a lock held `hold`: granted after the release, never while held.
void expect_wait_outlasts_server_timeouts(ILockProvider& holder_side, ILockProvider& waiter_side,
                                          std::chrono::milliseconds hold, std::chrono::milliseconds wait) {
  auto a = holder_side.try_lock("long", Wait::try_once(), {.owner = "a"});
  ASSERT_TRUE(a);
  std::atomic<bool> released{false};
  std::thread t([&] {
    std::this_thread::sleep_for(hold);
    released = true;
    EXPECT_TRUE(a->release());
  });
  const auto t0 = Clock::now();
  std::optional<Lease> b;
  EXPECT_NO_THROW(b = waiter_side.try_lock("long", Wait::for_duration(wait), {.owner = "b"}));
  const auto took = Clock::now() - t0;
  t.join();
  ASSERT_TRUE(b) << "the wait ended without the lock after "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  EXPECT_TRUE(released.load()) << "granted while the holder still held the lock";
  EXPECT_GE(took, hold - 50ms);
  EXPECT_GT(b->fencing_token(), a->fencing_token());
  EXPECT_TRUE(b->release());
}

TEST_F(MysqlServerFaultsTest, ShortGlobalInnodbLockWaitTimeoutNeverCutsAWaitShort) {
  // Every new session starts with innodb_lock_wait_timeout=1: the backend sets its own per
  // session, so a 3 s wait outlasts a 2.5 s hold.
  GlobalLockWaitTimeout short_timeout(*db_, 1);
  auto holder = dlock::open(db_->uri("session_timeout=5s"));
  auto waiter = dlock::open(db_->uri("session_timeout=5s"));
  expect_wait_outlasts_server_timeouts(*holder, *waiter, 2500ms, 4000ms);
}

TEST_F(MysqlServerFaultsTest, WaitChunksShorterThanTheWaitRequeueWithoutAFalseGrant) {
  // wait_chunk=1s: the waiter's connection is silent for longer than a chunk (TCP
  // keepalive, not a read timeout, watches it); the wait is never cut short or taken for a grant.
  auto holder = dlock::open(db_->uri("session_timeout=5s"));
  auto waiter = dlock::open(db_->uri("session_timeout=5s&wait_chunk=1s"));
  expect_wait_outlasts_server_timeouts(*holder, *waiter, 2500ms, 4000ms);
}

}  // namespace
}  // namespace dlock::mysql::test

namespace dlock::mysql::test {
namespace {

// A hold granted by a wait lives on a long-class connection, whose read timeout is
// wait_chunk + command_timeout. Its release still answers within about command_timeout when
// the server stops answering (SIGSTOP): the socket is shut down at the deadline (ReadBound).
TEST_F(MysqlServerFaultsTest, ReleaseOfAWaitGrantedHoldIsBoundedWhenTheServerStalls) {
  const pid_t server = mariadbd_pid();
  ASSERT_GT(server, 0) << "no mariadbd pid from servers.sh status";
  auto holder = dlock::open(db_->uri("session_timeout=10s"));
  auto p = dlock::open(db_->uri("session_timeout=10s&command_timeout=500ms&wait_chunk=20s"));
  auto first = holder->try_lock("stall-release", Wait::try_once());
  ASSERT_TRUE(first);
  std::optional<Lease> granted;
  std::thread waiter([&] { granted = p->try_lock("stall-release", Wait::for_duration(10s)); });
  std::this_thread::sleep_for(200ms);  // the waiter queues in InnoDB
  EXPECT_TRUE(first->release());
  waiter.join();
  ASSERT_TRUE(granted.has_value()) << "the waiter was not granted";
  ASSERT_FALSE(granted->lost_token().stop_requested());
  ASSERT_EQ(::kill(server, SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }  // also when an assertion below returns early
  } resume{server};
  // kill() returns before every thread has stopped: one may still answer a statement.
  ASSERT_TRUE(all_threads_stopped(server, 2s)) << "mariadbd did not stop";
  const auto t0 = Clock::now();
  try {
    static_cast<void>(granted->release());  // either answer is honest: the connection is dropped
  } catch (const Error&) {
  }
  const auto took = Clock::now() - t0;
  ::kill(server, SIGCONT);
  EXPECT_LT(took, 2500ms) << "release waited for the long read timeout (20.5 s)";
  EXPECT_GE(took, 400ms) << "the server answered although it was stopped";
  // Dropping the connection ended the transaction: the name is free again.
  auto again = holder->try_lock("stall-release", Wait::for_duration(5s));
  EXPECT_TRUE(again);
}

// A wait that gives up while the server is stalled (SIGSTOP) returns within its wait plus
// one command_timeout (the round trip it would otherwise be): the KILL QUERY that ends its
// server-side wait (which needs a new connection, hanging until connect_timeout) goes on in
// the background. Once the server is back, the abandoned waiter neither keeps nor later
// takes the lock.
TEST_F(MysqlServerFaultsTest, GivingUpAWaitWhileTheServerStallsReturnsWithinTheWait) {
  const pid_t server = mariadbd_pid();
  ASSERT_GT(server, 0) << "no mariadbd pid from servers.sh status";
  auto holder = dlock::open(db_->uri("session_timeout=10s"));
  auto p = dlock::open(db_->uri("session_timeout=10s&connect_timeout=500ms&command_timeout=500ms"));
  auto first = holder->try_lock("stall-wait", Wait::try_once(), {.owner = "a"});
  ASSERT_TRUE(first);
  std::optional<Lease> got;
  std::chrono::steady_clock::duration took{};
  std::thread waiter([&] {
    const auto t0 = Clock::now();
    got = p->try_lock("stall-wait", Wait::for_duration(1500ms), {.owner = "w"});
    took = Clock::now() - t0;
  });
  std::this_thread::sleep_for(300ms);  // the waiter queues in InnoDB
  ASSERT_EQ(::kill(server, SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{server};
  ASSERT_TRUE(all_threads_stopped(server, 2s)) << "mariadbd did not stop";
  waiter.join();
  ::kill(server, SIGCONT);
  EXPECT_FALSE(got.has_value());
  EXPECT_LT(took, 1500ms + 500ms + 400ms) << "gave up after "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  EXPECT_TRUE(first->release());
  auto again = holder->try_lock("stall-wait", Wait::for_duration(5s), {.owner = "b"});
  EXPECT_TRUE(again) << "the abandoned waiter kept the lock";
}

// Row mode claims fairness: waiters are granted in the order they queued, also when their
// waits span several wait_chunk periods (a waiter that re-issued its wait at a chunk's end
// went to the back of InnoDB's queue).
TEST_F(MysqlServerFaultsTest, WaitersSpanningSeveralChunksAreGrantedInQueueOrder) {
  auto holder = dlock::open(db_->uri("session_timeout=10s"));
  auto first = holder->try_lock("fifo", Wait::try_once(), {.owner = "h"});
  ASSERT_TRUE(first);
  constexpr int kWaiters = 4;
  std::vector<std::shared_ptr<ILockProvider>> waiters;
  for (int i = 0; i < kWaiters; ++i) waiters.push_back(dlock::open(db_->uri("session_timeout=10s&wait_chunk=1s")));
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto l = waiters[i]->try_lock("fifo", Wait::for_duration(20s), {.owner = "w" + std::to_string(i)});
      if (!l) return;
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      std::this_thread::sleep_for(50ms);
      l->release();
    });
    std::this_thread::sleep_for(300ms);  // queued in this order
  }
  std::this_thread::sleep_for(2500ms);  // every waiter's wait spans at least two chunks
  EXPECT_TRUE(first->release());
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

// Sets GLOBAL read_only for the test and puts it back.
class ReadOnlyServer {
 public:
  ReadOnlyServer() { TestDb::run_as_root("SET GLOBAL read_only=1"); }
  ~ReadOnlyServer() {
    try {
      TestDb::run_as_root("SET GLOBAL read_only=0");
    } catch (...) {
    }
  }
};

// Every lease-mode acquire writes its row: on a read-only server opening the provider fails
// at once with unavailable naming the read-only server (it opened, and every acquire then
// retried until its deadline: `dlock run` with the default wait hung for good).
TEST_F(MysqlServerFaultsTest, AReadOnlyServerFailsToOpenInBothModes) {
  dlock::open(db_->uri("mode=lease"));  // the tables exist: only the writes can fail
  dlock::open(db_->uri());
  ReadOnlyServer read_only;
  const auto t0 = Clock::now();
  try {
    dlock::open(db_->uri("mode=lease"));
    ADD_FAILURE() << "a lease-mode provider opened on a read-only server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, 2s);
  try {
    dlock::open(db_->uri());
    ADD_FAILURE() << "a row-mode provider opened on a read-only server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dlock::mysql::test
