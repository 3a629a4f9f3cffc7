// The redis backend's atomic operations against a real server, through the SPI (no core
// wait loop): key layout, owner checks, fencing, idempotent release, batch renewal,
// read-write with writer preference, the fair queue and push wake-ups.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "keys.h"
#include "scripts.h"
#include "test_server.h"

namespace dlock::redis::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
class RedisBackendTest : public ::testing::Test {
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
    waiting_.clear();
    if (!raw_) return;
    // Remove this test's keys.
    Reply keys = raw_->cmd({"KEYS", prefix_ + "*"});
    for (std::size_t i = 0; keys && i < keys->elements; ++i) {
      raw_->cmd({"DEL", std::string_view(keys->element[i]->str, keys->element[i]->len)});
    }
  }

  // One attempt, as the core makes it: a caller that waits keeps its acquire call (its
  // queue entry and wake-up registration) from one attempt to the next until it gets the
  // lock; a try-once caller makes one attempt.
  HeldPtr try_get(const Req& r) {
    if (!r.will_wait) return Acquire(*backend_, r).try_get();
    const std::string id = r.waiter.empty() ? r.owner : r.waiter;
    auto& acq = waiting_[id];
    if (!acq) acq = std::make_unique<Acquire>(*backend_, r);
    auto held = acq->try_get();
    if (held) waiting_.erase(id);
    return held;
  }
  // A caller that waits, as the core makes it: attempts, and after a busy one waits for the
  // wake-up (wait_fd), until granted or `within` passed. A waiting acquire of a name seen
  // busy before answers its first attempt busy without a round trip (it queued and blocked
  // at once): its grant comes with the wake-up.
  HeldPtr wait_get(const Req& r, milliseconds within = 2000ms) {
    const auto until = std::chrono::steady_clock::now() + within;
    for (;;) {
      if (auto held = try_get(r)) return held;
      const auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
      if (left <= 0ms || !waiting_[r.waiter.empty() ? r.owner : r.waiter]->woken(left)) return nullptr;
    }
  }
  // The waiting caller gives up (times out, is cancelled): its acquire call ends.
  void give_up(const Req& r) { waiting_.erase(r.waiter.empty() ? r.owner : r.waiter); }
  LockKeys keys(std::string_view name) const { return LockKeys(prefix_, name); }

  std::string prefix_, uri_;
  std::unique_ptr<RedisBackend> backend_;
  std::map<std::string, std::unique_ptr<Acquire>> waiting_;
  std::unique_ptr<Raw> raw_;
};

TEST_F(RedisBackendTest, KeyLayoutOnTheServer) {
  const std::string name = "inv{x}:1 %";
  auto held = try_get({name, "c1:alice"});
  ASSERT_TRUE(held);
  const auto k = keys(name);
  EXPECT_EQ(k.hold, prefix_ + "{inv%7Bx%7D%3A1%20%25}");
  EXPECT_EQ(raw_->string({"TYPE", k.hold}), "string");
  EXPECT_EQ(raw_->string({"GET", k.hold}), "c1:alice");  // the writer's owner key  // field = owner key, value = holds
  EXPECT_EQ(raw_->string({"GET", k.counter}), std::to_string(held->fencing_token()));
  const long long pttl = raw_->integer({"PTTL", k.hold});
  EXPECT_GT(pttl, 9000);
  EXPECT_LE(pttl, 10000);
  // The fencing counter outlives the hold by ten leases (the clock floor makes a lost one harmless).
  const long long counter_ttl = raw_->integer({"PTTL", k.counter});
  EXPECT_GT(counter_ttl, 90000);
  EXPECT_LE(counter_ttl, 100000);
  EXPECT_TRUE(backend_->release(*held));
  EXPECT_EQ(raw_->integer({"EXISTS", k.hold}), 0);
}

TEST_F(RedisBackendTest, NamesCannotReachAnotherLocksKeys) {
  // "a" and names that spell a's auxiliary keys or tag: all distinct locks.
  auto a = try_get({"a", "c1:o"});
  ASSERT_TRUE(a);
  for (const std::string& other : std::vector<std::string>{"a}:t", "a}", "{a}", "a:r", "a%7D", std::string("a\0", 2), "A"}) {
    auto h = try_get({other, "c2:o"});
    ASSERT_TRUE(h) << "name " << other << " collided with a";
    EXPECT_TRUE(backend_->release(*h));
  }
  EXPECT_TRUE(raw_->holds(keys("a").hold, "c1:o"));
  // Arbitrary bytes up to the documented maximum.
  std::string big(1024, '\xff');
  big[3] = '{';
  auto b = try_get({big, "c1:o"});
  ASSERT_TRUE(b);
  EXPECT_TRUE(backend_->release(*b));
  EXPECT_TRUE(backend_->release(*a));
}

TEST_F(RedisBackendTest, ExclusiveExcludesAndReportsTheHoldersTtl) {
  auto a = try_get({"m", "c1:a", LockMode::exclusive, 5s});
  ASSERT_TRUE(a);
  auto busy = Acquire(*backend_, Req{"m", "c1:b"}).attempt();
  ASSERT_TRUE(std::holds_alternative<spi::Busy>(busy));
  auto after = std::get<spi::Busy>(busy).retry_after;
  ASSERT_TRUE(after);
  EXPECT_GT(*after, 4000ms);
  EXPECT_LE(*after, 5001ms);  // remaining ms + 1
  EXPECT_FALSE(try_get({"m", "c1:c", LockMode::shared}));
  EXPECT_TRUE(backend_->release(*a));
  EXPECT_TRUE(try_get({"m", "c1:b"}));
}

TEST_F(RedisBackendTest, ReleaseIsOwnerChecked) {
  auto a = try_get({"r", "c1:a"});
  ASSERT_TRUE(a);
  RedisHeldLock forged("r", LockMode::exclusive, "c1:b", a->fencing_token(), a->expires_at());
  EXPECT_FALSE(backend_->release(forged));
  EXPECT_TRUE(raw_->holds(keys("r").hold, "c1:a"));
  EXPECT_TRUE(backend_->release(*a));
  EXPECT_FALSE(backend_->release(forged));
}

TEST_F(RedisBackendTest, StaleHolderCannotReleaseOrExtend) {
  auto stale = try_get({"s", "c1:a", LockMode::exclusive, 100ms});
  ASSERT_TRUE(stale);
  std::this_thread::sleep_for(200ms);
  auto fresh = try_get({"s", "c1:b"});
  ASSERT_TRUE(fresh) << "the expired lease did not free the lock";
  EXPECT_GT(fresh->fencing_token(), stale->fencing_token());
  spi::HeldLock* locks[] = {stale.get()};
  spi::RenewStatus out[1];
  backend_->extend_many(locks, 10s, out);
  EXPECT_EQ(out[0], spi::RenewStatus::not_held);
  EXPECT_FALSE(backend_->release(*stale));
  EXPECT_TRUE(raw_->holds(keys("s").hold, "c1:b"));
  EXPECT_TRUE(backend_->release(*fresh));
}

TEST_F(RedisBackendTest, FencingTokensIncreaseAcrossHolders) {
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto h = try_get({"f", "c1:o" + std::to_string(i), i % 2 ? LockMode::shared : LockMode::exclusive});
    ASSERT_TRUE(h);
    EXPECT_GT(h->fencing_token(), last);
    last = h->fencing_token();
    EXPECT_TRUE(backend_->release(*h));
  }
  // Two readers at once get distinct tokens too.
  auto r1 = try_get({"f", "c1:r1", LockMode::shared});
  auto r2 = try_get({"f", "c1:r2", LockMode::shared});
  ASSERT_TRUE(r1 && r2);
  EXPECT_GT(r2->fencing_token(), r1->fencing_token());
}

TEST_F(RedisBackendTest, RetriedReleaseNeitherCountsTwiceNorLies) {
  auto a = try_get({"rr", "c1:a"});
  ASSERT_TRUE(a);
  EXPECT_TRUE(backend_->release(*a));
  auto b = try_get({"rr", "c1:b"});
  ASSERT_TRUE(b);
  // A retry of a's release (same request id, as after a lost reply) answers what the first
  // one did and leaves b alone.
  EXPECT_TRUE(backend_->release(*a));
  EXPECT_TRUE(raw_->holds(keys("rr").hold, "c1:b"));
  const auto k = keys("rr");
  EXPECT_EQ(raw_->string({"GET", k.latch(static_cast<RedisHeldLock&>(*a).release_id())}), "1");
  EXPECT_GT(raw_->integer({"PTTL", k.latch(static_cast<RedisHeldLock&>(*a).release_id())}), 0);
  EXPECT_TRUE(backend_->release(*b));
}

TEST_F(RedisBackendTest, RetriedAcquireRecognisesItsOwnGrant) {
  // The same request again (as after a lost reply): granted once, counted once.
  auto first = try_get({"ra", "c1:a", LockMode::exclusive, 2s, false, true, "ra-a"});
  ASSERT_TRUE(first);
  auto again = try_get({"ra", "c1:a", LockMode::exclusive, 10s, false, true, "ra-a"});
  // The first attempt of a new acquire call does not look for its own hold (that costs a
  // read on every busy attempt); its blocking wait then finds the hold without a grant to
  // tell, and wakes it: the next attempt, as the core makes it, picks the hold up.
  if (!again) again = try_get({"ra", "c1:a", LockMode::exclusive, 10s, false, true, "ra-a"});
  ASSERT_TRUE(again);
  EXPECT_GT(again->fencing_token(), first->fencing_token());  // a new hold: a new token
  EXPECT_TRUE(raw_->holds(keys("ra").hold, "c1:a"));
  EXPECT_GT(raw_->integer({"PTTL", keys("ra").hold}), 5000);
  EXPECT_TRUE(backend_->release(*again));
  EXPECT_EQ(raw_->integer({"EXISTS", keys("ra").hold}), 0);
  // Another owner is still refused, of course.
  auto r = wait_get({"ra", "c1:r", LockMode::shared, 10s, false, true, "ra-r"});
  ASSERT_TRUE(r);
  EXPECT_TRUE(raw_->holds(keys("ra").hold, "c1:r"));
  EXPECT_FALSE(try_get({"ra", "c1:w"}));
}

TEST_F(RedisBackendTest, BatchRenewalChecksEveryOwner) {
  constexpr int kLocks = 250;
  std::vector<HeldPtr> held;
  for (int i = 0; i < kLocks; ++i) {
    held.push_back(try_get({"batch" + std::to_string(i), "c1:o", i % 5 == 0 ? LockMode::shared : LockMode::exclusive, 2s}));
    ASSERT_TRUE(held.back());
  }
  // One lock deleted, one taken over by someone else behind our back.
  raw_->cmd({"DEL", keys("batch7").hold});
  raw_->cmd({"DEL", keys("batch8").hold});
  raw_->cmd({"SET", keys("batch8").hold, "c9:thief"});
  std::vector<spi::HeldLock*> ptrs;
  for (auto& h : held) ptrs.push_back(h.get());
  std::vector<spi::RenewStatus> out(kLocks, spi::RenewStatus::failed);
  const auto before = std::chrono::steady_clock::now();
  backend_->extend_many(ptrs, 60s, out);
  for (int i = 0; i < kLocks; ++i) {
    if (i == 7 || i == 8) {
      EXPECT_EQ(out[i], spi::RenewStatus::not_held) << i;
      continue;
    }
    ASSERT_EQ(out[i], spi::RenewStatus::renewed) << i;
    EXPECT_GE(held[i]->expires_at(), before + 60s - 600ms - 2ms);  // less the drift allowance
    EXPECT_LT(held[i]->expires_at(), std::chrono::steady_clock::now() + 60s);
  }
  EXPECT_GT(raw_->integer({"PTTL", keys("batch0").readers}), 50000);  // a reader
  EXPECT_GT(raw_->integer({"PTTL", keys("batch1").hold}), 50000);   // a writer
  EXPECT_EQ(raw_->integer({"PTTL", keys("batch8").hold}), -1);      // the thief's key untouched
}

TEST_F(RedisBackendTest, ReadersShareAndEachExpiresOnItsOwn) {
  auto r1 = try_get({"rw", "c1:r1", LockMode::shared, 150ms});
  auto r2 = try_get({"rw", "c1:r2", LockMode::shared, 5s});
  ASSERT_TRUE(r1 && r2);
  EXPECT_FALSE(try_get({"rw", "c1:w"}));
  std::this_thread::sleep_for(250ms);
  // r1 crashed (never released): only r2 still counts.
  EXPECT_FALSE(try_get({"rw", "c1:w"}));
  spi::HeldLock* one[] = {r1.get()};
  spi::RenewStatus out[1];
  backend_->extend_many(one, 5s, out);
  EXPECT_EQ(out[0], spi::RenewStatus::not_held) << "an expired reader was renewed";
  EXPECT_FALSE(backend_->release(*r1));
  EXPECT_TRUE(backend_->release(*r2));
  auto w = try_get({"rw", "c1:w"});
  ASSERT_TRUE(w);
  EXPECT_FALSE(try_get({"rw", "c1:r3", LockMode::shared}));
}

TEST_F(RedisBackendTest, CrashedReaderFreesTheLockByItself) {
  ASSERT_TRUE(try_get({"cr", "c1:r1", LockMode::shared, 100ms}));
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(try_get({"cr", "c1:w"}));
}

TEST_F(RedisBackendTest, WaitingWriterKeepsNewReadersOut) {
  auto r1 = try_get({"wp", "c1:r1", LockMode::shared});
  ASSERT_TRUE(r1);
  Req writer{"wp", "c1:w", LockMode::exclusive, 10s, false, true, "wait-w"};
  EXPECT_FALSE(try_get(writer));  // busy, and now marked as waiting
  EXPECT_FALSE(try_get({"wp", "c1:r2", LockMode::shared})) << "a new reader overtook the waiting writer";
  EXPECT_TRUE(backend_->release(*r1));
  auto w = try_get(writer);  // the release handed it over; this attempt picks it up
  ASSERT_TRUE(w);
  EXPECT_EQ(raw_->integer({"EXISTS", keys("wp").queue}), 0);
  EXPECT_TRUE(backend_->release(*w));
  EXPECT_TRUE(try_get({"wp", "c1:r2", LockMode::shared}));
}

TEST_F(RedisBackendTest, AWriterThatGivesUpLetsReadersIn) {
  auto r1 = try_get({"wg", "c1:r1", LockMode::shared});
  ASSERT_TRUE(r1);
  Req writer{"wg", "c1:w", LockMode::exclusive, 10s, false, true, "wait-w"};
  EXPECT_FALSE(try_get(writer));
  EXPECT_FALSE(try_get({"wg", "c1:r2", LockMode::shared}));
  give_up(writer);
  EXPECT_TRUE(try_get({"wg", "c1:r2", LockMode::shared}));
}

TEST_F(RedisBackendTest, FairWaitersAreServedInArrivalOrder) {
  auto h = try_get({"fifo", "c1:h"});
  ASSERT_TRUE(h);
  std::vector<Req> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back({"fifo", "c1:f" + std::to_string(i), LockMode::exclusive, 10s, true, true,
                       "fw" + std::to_string(i)});
    EXPECT_FALSE(try_get(waiters.back()));
  }
  EXPECT_EQ(raw_->integer({"ZCARD", keys("fifo").queue}), 3);
  EXPECT_TRUE(backend_->release(*h));
  // Nobody barges past the head: not a later fair waiter, not a newcomer, fair or not.
  EXPECT_FALSE(try_get({"fifo", "c1:n"}));
  EXPECT_FALSE(try_get({"fifo", "c1:nf", LockMode::exclusive, 10s, true, false, "nf"}));
  EXPECT_FALSE(try_get(waiters[2]));
  EXPECT_FALSE(try_get(waiters[1]));
  for (int i = 0; i < 3; ++i) {
    auto g = try_get(waiters[i]);
    ASSERT_TRUE(g) << "waiter " << i << " was not served in order";
    if (i + 1 < 3) {
      EXPECT_FALSE(try_get(waiters[i + 1]));
    }
    EXPECT_TRUE(backend_->release(*g));
  }
  const auto k = keys("fifo");
  for (const std::string* key : {&k.queue, &k.deadlines}) {
    EXPECT_EQ(raw_->integer({"EXISTS", *key}), 0) << *key << " left behind";
  }
  EXPECT_TRUE(try_get({"fifo", "c1:n"}));
}

TEST_F(RedisBackendTest, FairTryOnceLeavesNoQueueEntry) {
  auto h = try_get({"fo", "c1:h"});
  ASSERT_TRUE(h);
  EXPECT_FALSE(try_get({"fo", "c1:f", LockMode::exclusive, 10s, true, false, "once"}));
  EXPECT_EQ(raw_->integer({"EXISTS", keys("fo").queue}), 0);
}

TEST_F(RedisBackendTest, DeadWaiterIsPurgedAfterItsHeartbeat) {
  auto h = try_get({"dead", "c1:h"});
  ASSERT_TRUE(h);
  Req gone{"dead", "c1:gone", LockMode::exclusive, 10s, true, true, "gone"};
  Req live{"dead", "c1:live", LockMode::exclusive, 10s, true, true, "live"};
  EXPECT_FALSE(try_get(gone));
  EXPECT_FALSE(try_get(live));
  // live keeps refreshing (every attempt), gone does not, past gone's heartbeat (400 ms).
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(150ms);
    EXPECT_FALSE(try_get(live));
  }
  // Under a writer the dead entry may stay; the release drops it before handing over.
  EXPECT_TRUE(backend_->release(*h));
  EXPECT_FALSE(raw_->holds(keys("dead").hold, "c1:gone")) << "the lock went to the dead waiter";
  EXPECT_TRUE(try_get(live));
  EXPECT_EQ(raw_->integer({"EXISTS", keys("dead").queue}), 0);
}

TEST_F(RedisBackendTest, AbandonGivesBackAGrantNotPickedUp) {
  auto h = try_get({"ag", "c1:h"});
  ASSERT_TRUE(h);
  Req a{"ag", "c1:a", LockMode::exclusive, 10s, false, true, "ag-a"};
  Req b{"ag", "c1:b", LockMode::exclusive, 10s, false, true, "ag-b"};
  EXPECT_FALSE(try_get(a));
  EXPECT_FALSE(try_get(b));
  EXPECT_TRUE(backend_->release(*h));  // hands the lock to a
  EXPECT_TRUE(raw_->holds(keys("ag").hold, "c1:a"));
  give_up(a);  // a timed out right then: the lock moves on to b
  EXPECT_FALSE(raw_->holds(keys("ag").hold, "c1:a"));
  auto g = try_get(b);
  ASSERT_TRUE(g);
  EXPECT_TRUE(backend_->release(*g));
  EXPECT_EQ(raw_->integer({"EXISTS", keys("ag").hold}), 0);
}

TEST_F(RedisBackendTest, AbandonRemovesTheQueueEntryAtOnce) {
  auto h = try_get({"ab", "c1:h"});
  ASSERT_TRUE(h);
  Req first{"ab", "c1:a", LockMode::exclusive, 10s, true, true, "first"};
  Req second{"ab", "c1:b", LockMode::exclusive, 10s, true, true, "second"};
  EXPECT_FALSE(try_get(first));
  EXPECT_FALSE(try_get(second));
  give_up(first);
  EXPECT_EQ(raw_->integer({"ZCARD", keys("ab").queue}), 1);
  EXPECT_TRUE(backend_->release(*h));
  EXPECT_TRUE(try_get(second));
}

TEST_F(RedisBackendTest, FairReadersFollowQueueOrder) {
  auto w = try_get({"fr", "c1:w"});
  ASSERT_TRUE(w);
  Req r1{"fr", "c1:r1", LockMode::shared, 10s, true, true, "r1"};
  Req w2{"fr", "c1:w2", LockMode::exclusive, 10s, true, true, "w2"};
  Req r2{"fr", "c1:r2", LockMode::shared, 10s, true, true, "r2"};
  EXPECT_FALSE(try_get(r1));
  EXPECT_FALSE(try_get(w2));
  EXPECT_FALSE(try_get(r2));
  EXPECT_TRUE(backend_->release(*w));
  auto g1 = try_get(r1);
  ASSERT_TRUE(g1);
  EXPECT_FALSE(try_get(r2)) << "r2 overtook the writer queued before it";
  EXPECT_FALSE(try_get(w2));
  EXPECT_TRUE(backend_->release(*g1));
  auto g2 = try_get(w2);
  ASSERT_TRUE(g2);
  EXPECT_TRUE(backend_->release(*g2));
  EXPECT_TRUE(try_get(r2));
}

// --- push wake-ups -------------------------------------------------------------------------

TEST_F(RedisBackendTest, ReleaseHandsTheLockToTheWaiterThroughItsGrantList) {
  auto h = try_get({"pw", "c1:h"});
  ASSERT_TRUE(h);
  Acquire waiter(*backend_, {"pw", "c1:w", LockMode::exclusive, 10s, false, true, "pw-w"});
  EXPECT_FALSE(waiter.try_get());  // busy: queued and blocked on its grant list
  EXPECT_GE(waiter.fallback_poll(), 100ms) << "blocked, yet polling fast";
  EXPECT_LE(waiter.fallback_poll(), 400ms / 3 + 1ms) << "a waiter must refresh within its heartbeat";
  EXPECT_FALSE(waiter.try_get());
  EXPECT_FALSE(waiter.woken(0ms));
  EXPECT_TRUE(backend_->release(*h));
  EXPECT_TRUE(waiter.woken(2s)) << "no wake-up after the release";
  auto g = waiter.try_get();  // picks up the grant the release made
  ASSERT_TRUE(g);
  EXPECT_EQ(raw_->string({"GET", keys("pw").counter}), std::to_string(g->fencing_token()));
  EXPECT_TRUE(raw_->holds(keys("pw").hold, "c1:w"));
  EXPECT_TRUE(backend_->release(*g));
}

TEST_F(RedisBackendTest, OnlyTheHeadIsWokenByName) {
  auto h = try_get({"pf", "c1:h"});
  ASSERT_TRUE(h);
  Acquire a(*backend_, {"pf", "c1:a", LockMode::exclusive, 10s, true, true, "pf-a"});
  Acquire b(*backend_, {"pf", "c1:b", LockMode::exclusive, 10s, true, true, "pf-b"});
  EXPECT_FALSE(a.try_get());
  EXPECT_FALSE(b.try_get());
  EXPECT_TRUE(backend_->release(*h));
  EXPECT_TRUE(a.woken(2s));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(b.woken(0ms)) << "the second waiter was woken for the head's turn";
  auto g = a.try_get();
  ASSERT_TRUE(g);
  EXPECT_TRUE(backend_->release(*g));
  EXPECT_TRUE(b.woken(2s));
  EXPECT_TRUE(b.try_get());
}

TEST_F(RedisBackendTest, QueuedReadersAreLetInTogether) {
  auto h = try_get({"all", "c1:h"});
  ASSERT_TRUE(h);
  std::vector<std::unique_ptr<Acquire>> reqs;
  for (int i = 0; i < 4; ++i) {
    const bool writer = i == 3;
    reqs.push_back(std::make_unique<Acquire>(
        *backend_,
        Req{"all", "c1:q" + std::to_string(i), writer ? LockMode::exclusive : LockMode::shared, 10s,
            false, true, "all" + std::to_string(i)}));
    EXPECT_FALSE(reqs.back()->try_get());
  }
  EXPECT_TRUE(backend_->release(*h));
  std::set<std::uint64_t> tokens;
  std::vector<HeldPtr> readers;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(reqs[i]->woken(2s)) << "reader " << i;
    readers.push_back(reqs[i]->try_get());
    ASSERT_TRUE(readers.back());
    tokens.insert(readers.back()->fencing_token());
  }
  EXPECT_EQ(tokens.size(), 3u);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(reqs[3]->woken(0ms)) << "the writer behind the readers was woken";
  for (auto& r : readers) EXPECT_TRUE(backend_->release(*r));
  EXPECT_TRUE(reqs[3]->woken(2s));
  EXPECT_TRUE(reqs[3]->try_get());
}

// A waiter on a name this process saw busy queues and blocks in one write, and the server
// writes nothing back to it until the grant: its first attempt is answered without a reply.
TEST_F(RedisBackendTest, AWaiterOnAContendedNameQueuesAndBlocksInOneWrite) {
  auto h = try_get({"qw", "c1:h"});
  ASSERT_TRUE(h);
  {
    Acquire first(*backend_, {"qw", "c1:a", LockMode::exclusive, 10s, false, true, "qw-a"});
    EXPECT_FALSE(first.try_get());  // a plain attempt: busy, and "qw" is now known contended
  }  // gives up: abandoned
  EXPECT_EQ(raw_->integer({"ZCARD", keys("qw").queue}), 0);
  auto silent_calls = [&] {  // CLIENT REPLY SKIP: the attempt whose reply nobody reads
    auto info = raw_->string({"INFO", "commandstats"}).value_or("");
    auto at = info.find("cmdstat_client|reply:calls=");
    return at == std::string::npos ? 0LL : std::stoll(info.substr(at + 27));
  };
  const long long silent_before = silent_calls();
  Acquire b(*backend_, {"qw", "c1:b", LockMode::exclusive, 10s, false, true, "qw-b"});
  EXPECT_FALSE(b.try_get());
  // Queued by the silent attempt (no round trip was waited for: look until it shows).
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (raw_->integer({"ZCARD", keys("qw").queue}) == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(raw_->integer({"ZCARD", keys("qw").queue}), 1);
  EXPECT_EQ(silent_calls() - silent_before, 1) << "not queued by a silent attempt";
  EXPECT_FALSE(b.woken(100ms)) << "the server answered the silent attempt";
  EXPECT_TRUE(backend_->release(*h));
  ASSERT_TRUE(b.woken(2s)) << "no grant after the release";
  auto g = b.try_get();
  ASSERT_TRUE(g);
  EXPECT_TRUE(raw_->holds(keys("qw").hold, "c1:b"));
  EXPECT_GT(raw_->integer({"PTTL", keys("qw").hold}), 9000) << "the pick-up did not give the full lease";
  EXPECT_TRUE(backend_->release(*g));
}

// The silent attempt's failures show at the waiter's next refresh: after SCRIPT FLUSH it ran
// nothing (NOSCRIPT, unanswered), and the refresh loads the script and queues or grants.
TEST_F(RedisBackendTest, ASilentAttemptThatFailedIsMadeGoodByTheRefresh) {
  auto h = try_get({"qf", "c1:h"});
  ASSERT_TRUE(h);
  {
    Acquire first(*backend_, {"qf", "c1:a", LockMode::exclusive, 10s, false, true, "qf-a"});
    EXPECT_FALSE(first.try_get());
  }
  raw_->cmd({"SCRIPT", "FLUSH"});
  Acquire b(*backend_, {"qf", "c1:b", LockMode::exclusive, 10s, false, true, "qf-b"});
  EXPECT_FALSE(b.try_get());
  EXPECT_LE(b.fallback_poll(), 400ms / 3 + 1ms) << "a failed silent attempt must be retried within the heartbeat";
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(raw_->integer({"ZCARD", keys("qf").queue}), 0) << "NOSCRIPT, yet queued";
  EXPECT_TRUE(backend_->release(*h));
  std::this_thread::sleep_for(b.fallback_poll());
  auto g = b.try_get();  // the refresh, as the core makes it after the fallback poll
  ASSERT_TRUE(g);
  EXPECT_TRUE(backend_->release(*g));
}

// A silent first attempt may still be on its way when its caller gives up and abandons: the
// abandon can run first and the attempt then grant a free lock to a caller that is gone. Such
// a grant must lapse like any grant nobody picked up: within the pick-up lease
// (fair_heartbeat/2), not the full lease. (The BLPOP and pick-up behind it make it full.)
TEST_F(RedisBackendTest, ASilentGrantNobodyPicksUpLapsesWithinThePickUpLease) {
  const auto k = keys("sg");
  const std::string marker = dataset_marker(prefix_);
  const std::string grants = k.grants("sg-gone");
  Reply r = raw_->cmd({"EVAL", lua::acquire, "2", k.hold, marker, "c1:gone", "x", "10000", "sg-gone", "1", "400",
                       "0", "10000", "", "1"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER) << (r && r->str ? r->str : "no reply");
  EXPECT_GT(r->integer, 0) << "the free lock was not granted";
  EXPECT_TRUE(raw_->holds(k.hold, "c1:gone"));
  EXPECT_EQ(raw_->string({"LINDEX", grants, "0"}), std::to_string(r->integer)) << "the grant was not pushed";
  const long long pttl = raw_->integer({"PTTL", k.hold});
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 200) << "a grant nobody reads holds the lock for the full lease";
}

}  // namespace
}  // namespace dlock::redis::test
