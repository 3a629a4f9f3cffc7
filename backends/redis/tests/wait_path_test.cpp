// Issue 12's wait-path bugs against the shared server: a dead head of the queue, lost
// wake-ups, short leases handed over, dead waiters piling up under a long hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "dlock/dlock.h"
#include "grant_wait.h"
#include "keys.h"
#include "scripts.h"
#include "test_server.h"

namespace dlock::redis::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class RedisWaitPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(shared_uri().empty()) << kNoServerMessage;
    prefix_ = unique_prefix();
    uri_ = with_params(shared_uri(), "prefix=" + prefix_ + "&fair_heartbeat=400ms");
    backend_ = std::make_unique<RedisBackend>(parse_options(Uri::parse(uri_)));
    raw_ = std::make_unique<Raw>(shared_uri());
    mark_dataset(*raw_, prefix_);
  }
  void TearDown() override {
    for (auto* leaked : dead_) delete leaked;
    if (!raw_) return;
    Reply keys = raw_->cmd({"KEYS", prefix_ + "*"});
    for (std::size_t i = 0; keys && i < keys->elements; ++i) {
      raw_->cmd({"DEL", std::string_view(keys->element[i]->str, keys->element[i]->len)});
    }
  }
  LockKeys keys(std::string_view name) const { return LockKeys(prefix_, name); }
  // A waiter that queues, then dies (SIGKILL): it never refreshes, never gives up. Its
  // acquisition is only destroyed at the end of the test.
  // A waiter that dies while queued: its acquire call never goes on, and its blocking
  // connection closes (as a SIGKILLed process's does), which ends its BLPOP on the server.
  void dead_waiter(const Req& r) {
    auto* a = new Acquire(*backend_, r);
    EXPECT_FALSE(a->try_get());
    dead_.push_back(a);
    auto list = raw_->string({"CLIENT", "LIST"});
    ASSERT_TRUE(list);
    int killed = 0;
    std::size_t at = 0;
    while (at < list->size()) {
      const std::size_t end = std::min(list->find('\n', at), list->size());
      const std::string line = list->substr(at, end - at);
      at = end + 1;
      if (line.find(" cmd=blpop") == std::string::npos) continue;
      const std::string id = line.substr(3, line.find(' ') - 3);  // "id=<n> addr=…"
      raw_->cmd({"CLIENT", "KILL", "ID", id});
      ++killed;
    }
    EXPECT_EQ(killed, 1) << "the dead waiter's blocking connection";
  }

  std::string prefix_, uri_;
  std::unique_ptr<RedisBackend> backend_;
  std::unique_ptr<Raw> raw_;
  std::vector<Acquire*> dead_;
};

// 1. A hand-over to a waiter that is gone costs at most about fair_heartbeat, not a lease.
TEST_F(RedisWaitPathTest, ADeadHeadOfTheQueueHoldsTheLockNoLongerThanItsHeartbeat) {
  auto h = Acquire(*backend_, Req{"dh", "c1:h"}).try_get();
  ASSERT_TRUE(h);
  dead_waiter({"dh", "c1:dead", LockMode::exclusive, 30s, true, true, "dead"});
  Acquire live(*backend_, {"dh", "c1:live", LockMode::exclusive, 30s, true, true, "live"});
  EXPECT_FALSE(live.try_get());
  EXPECT_TRUE(backend_->release(*h));  // hands the lock to the dead head
  const long long pttl = raw_->integer({"PTTL", keys("dh").hold});
  EXPECT_LE(pttl, 400) << "the dead waiter was handed a full lease";
  const auto start = Clock::now();
  HeldPtr g;
  while (!g && Clock::now() - start < 3s) {
    std::this_thread::sleep_for(std::min(live.fallback_poll(), std::chrono::milliseconds(400 / 3)));
    g = live.try_get();
  }
  ASSERT_TRUE(g) << "the live waiter never got the lock";
  EXPECT_LE(Clock::now() - start, 1s);  // the pick-up lease (200 ms) and a poll, not 30 s
}

// 3. A lease handed over runs its full length from the pick-up, however long ago the
// waiter last polled.
TEST_F(RedisWaitPathTest, AHandedOverLeaseIsFullFromThePickUp) {
  auto h = Acquire(*backend_, Req{"sl", "c1:h"}).try_get();
  ASSERT_TRUE(h);
  std::atomic<int> woken{0};
  Acquire w(*backend_, {"sl", "c1:w", LockMode::exclusive, 300ms, false, true}, [&] { ++woken; });
  EXPECT_FALSE(w.try_get());
  std::this_thread::sleep_for(200ms);  // the waiter's last poll is now 2/3 of its lease ago
  EXPECT_TRUE(backend_->release(*h));
  for (int i = 0; i < 200 && woken.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  const auto before = Clock::now();
  auto g = w.try_get();
  ASSERT_TRUE(g);
  EXPECT_GE(g->server_expiry(), before + 250ms) << "the lease was counted from the last poll";
  EXPECT_GT(raw_->integer({"PTTL", keys("sl").hold}), 150);
}

// 4. Waiters that died while a writer holds the lock leave the queue within their
// heartbeat, even while a live waiter keeps the queue alive.
TEST_F(RedisWaitPathTest, DeadWaitersLeaveTheQueueDuringALongHold) {
  auto h = Acquire(*backend_, Req{"acc", "c1:h"}).try_get();
  ASSERT_TRUE(h);
  for (int i = 0; i < 5; ++i) {
    dead_waiter({"acc", "c1:d" + std::to_string(i), LockMode::exclusive, 10s, false, true,
                 "d" + std::to_string(i)});
  }
  Acquire live(*backend_, {"acc", "c1:live", LockMode::exclusive, 10s, false, true, "live"});
  EXPECT_FALSE(live.try_get());
  EXPECT_EQ(raw_->integer({"ZCARD", keys("acc").queue}), 6);
  for (int i = 0; i < 6; ++i) {  // 900 ms of polling, past the dead ones' 400 ms heartbeat
    std::this_thread::sleep_for(150ms);
    EXPECT_FALSE(live.try_get());
  }
  EXPECT_EQ(raw_->integer({"ZCARD", keys("acc").queue}), 1) << "dead waiters piled up";
  EXPECT_TRUE(backend_->release(*h));
}

// 5. A waiter's silent first attempt (queued behind CLIENT REPLY SKIP on its own connection,
// BLPOP and pick-up behind it) may reach the server after the abandon the waiter sent on
// another connection when it gave up: the server does not order requests across
// connections, even on loopback (a churn run showed the abandon run 230 µs before the
// attempt, which then granted a reader lease nobody held, made full by the pick-up). An
// attempt that arrives after its abandon grants nothing.
TEST_F(RedisWaitPathTest, ASilentAttemptThatArrivesAfterItsAbandonGrantsNothing) {
  const LockKeys k = keys("late");
  auto h = Acquire(*backend_, Req{"late", "c1:h"}).try_get();
  ASSERT_TRUE(h);
  {
    Acquire first(*backend_, {"late", "c1:first", LockMode::shared, 10s, false, true, "first"});
    EXPECT_FALSE(first.try_get());
  }  // "late" is now a name this backend found busy: the next wait starts silent
  const Req r{"late", "c1:w", LockMode::shared, 10s, false, true, "w"};
  const spi::AttemptRequest view = r.get();
  {
    Acquire w(*backend_, r);
    EXPECT_FALSE(w.try_get());
    for (int i = 0; i < 200 && raw_->integer({"ZCARD", k.queue}) == 0; ++i) {
      std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(raw_->integer({"ZCARD", k.queue}), 1) << "the silent attempt did not queue";
  }  // gives up: the abandon removes its entry
  EXPECT_TRUE(backend_->release(*h));  // the lock is free, nobody waits
  // The same requests once more, as a network that held them back would deliver them after
  // the abandon (the waiter's wait connection closed, so nothing reads the answer).
  auto c = Connection::open(backend_->options());
  c->command(std::initializer_list<std::string_view>{"CLIENT", "SETNAME", "late-attempt"});
  Scripts scripts(*c);
  GrantWait late(std::move(c), scripts, k.hold, k.grants(r.waiter), r.owner, r.lease, 400ms,
                 [&](Connection& conn) { backend_->append_silent_acquire(conn, view, k); });
  // It has run once its BLPOP blocks (nothing granted) or it answers (granted).
  auto late_blpop_blocks = [&] {
    const auto clients = raw_->string({"CLIENT", "LIST"});
    const std::size_t at = clients ? clients->find("name=late-attempt") : std::string::npos;
    if (at == std::string::npos) return false;
    const std::string line = clients->substr(at, clients->find('\n', at) - at);
    return line.find("cmd=blpop") != std::string::npos;
  };
  bool granted = false, blocked = false;
  for (int i = 0; i < 400 && !granted && !blocked; ++i) {
    std::this_thread::sleep_for(5ms);
    granted = late.poll().state == GrantWait::State::granted;
    blocked = late_blpop_blocks();
  }
  ASSERT_TRUE(granted || blocked) << "the late attempt never ran";
  EXPECT_FALSE(granted) << "the departed waiter was granted the lock, for "
                        << raw_->integer({"PTTL", k.hold}) << " ms";
  EXPECT_FALSE(raw_->holds(k.hold, r.owner)) << "a hold nobody owns";
  EXPECT_EQ(raw_->integer({"EXISTS", k.queue}), 0) << "a queue entry nobody refreshes";
  EXPECT_TRUE(Acquire(*backend_, Req{"late", "c1:next"}).try_get()) << "the lock is not free";
}

// 2. No lost wake-ups: two contenders hand the lock back and forth; the lock never sits
// idle for a fallback poll (~1 s) because a grant was published before its waiter
// subscribed.
TEST_F(RedisWaitPathTest, TwoContendersNeverLeaveTheLockIdle) {
  // command_timeout=200ms: a waiter's channel counts as long subscribed after 300 ms.
  const std::string uri = with_params(shared_uri(), "prefix=" + prefix_ + "&command_timeout=200ms");
  auto p1 = dlock::open(uri);
  auto p2 = dlock::open(uri);
  std::atomic<bool> stop{false};
  std::mutex mu;
  Clock::time_point last_release = Clock::now();
  Clock::duration worst{0};
  int grants = 0;
  auto run = [&](ILockProvider& p) {
    while (!stop.load()) {
      auto lease = p.try_lock("pp", Wait::for_duration(5s));
      if (!lease) continue;
      {
        std::lock_guard lock(mu);
        worst = std::max(worst, Clock::now() - last_release);
        ++grants;
      }
      std::this_thread::sleep_for(200us);
      {
        std::lock_guard lock(mu);
        last_release = Clock::now();
      }
      lease->release();
    }
  };
  std::thread t1(run, std::ref(*p1)), t2(run, std::ref(*p2));
  std::this_thread::sleep_for(4s);
  stop = true;
  t1.join();
  t2.join();
  EXPECT_GT(grants, 100);
  EXPECT_LT(worst, 600ms) << "the lock sat idle for "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(worst).count() << " ms";
}

}  // namespace
}  // namespace dlock::redis::test
