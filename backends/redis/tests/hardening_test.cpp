// Issue 11 on a private redis-server: no double grant after data loss (a restart that
// restored an older snapshot, FLUSHALL, a restart without persistence), eviction refused,
// release and abandon under OOM, no half-written scripts, ACL needs checked at connect, and
// fencing counters that expire while tokens keep increasing.
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "dlock/dlock.h"
#include "keys.h"
#include "test_server.h"

namespace dlock::redis::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class RedisHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(shared_uri().empty()) << kNoServerMessage;
    server_ = std::make_unique<PrivateServer>();
    ASSERT_TRUE(server_->running()) << "could not start a private redis-server (is it installed?)";
    raw_ = std::make_unique<Raw>(server_->uri());
    mark_dataset(*raw_, "dlock:");
  }

  std::unique_ptr<RedisBackend> backend(const std::string& params = "") {
    const std::string uri = params.empty() ? server_->uri() : with_params(server_->uri(), params);
    return std::make_unique<RedisBackend>(parse_options(Uri::parse(uri)));
  }
  static HeldPtr grant(RedisBackend& b, const std::string& name, const std::string& owner,
                       std::chrono::milliseconds lease = 10s) {
    return Acquire(b, Req{name, owner, LockMode::exclusive, lease}).try_get();
  }
  // Tries once every 20 ms until granted or `limit` passed.
  static HeldPtr grant_within(RedisBackend& b, const std::string& name, const std::string& owner,
                              std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    for (;;) {
      if (auto h = grant(b, name, owner)) return h;
      if (Clock::now() > end) return nullptr;
      std::this_thread::sleep_for(20ms);
    }
  }
  std::pair<ErrorCode, std::string> open_error(const std::string& uri) {
    try {
      dlock::open(uri);
    } catch (const Error& e) {
      return {e.code(), e.what()};
    }
    ADD_FAILURE() << "opened " << uri;
    return {ErrorCode::internal, ""};
  }
  // A writer `owner` that waits for `name` and was queued by its first attempt (busy).
  static std::unique_ptr<Acquire> queued_writer(RedisBackend& b, const std::string& name,
                                                const std::string& owner) {
    auto w = std::make_unique<Acquire>(b, Req{name, owner, LockMode::exclusive, 10s, false, true});
    EXPECT_FALSE(w->try_get()) << owner << " was granted, not queued";
    return w;
  }
  // Data loss as the backend sees it: the marker is gone, so nothing is granted (nor handed
  // over) until the pause after data loss is over.
  void lose_the_marker() { raw_->cmd({"DEL", "dlock:epoch"}); }
  static std::string lock_key(std::string_view name) { return LockKeys("dlock:", name).hold; }
  static std::string counter_key(std::string_view name) { return LockKeys("dlock:", name).counter; }

  std::unique_ptr<PrivateServer> server_;
  std::unique_ptr<Raw> raw_;
};

// --- 1. tokens across a restart that restores an older snapshot ---------------------------

TEST_F(RedisHardeningTest, TokensKeepIncreasingAfterARestartRestoresAnOlderSnapshot) {
  auto b = backend("restart_grace=300ms");
  auto h0 = grant(*b, "snap", "c:0");
  ASSERT_TRUE(h0);
  EXPECT_TRUE(b->release(*h0));
  ASSERT_EQ(raw_->string({"SAVE"}), "OK");  // the snapshot the server will come back with
  std::uint64_t last = 0;
  for (int i = 1; i <= 3; ++i) {
    auto h = grant(*b, "snap", "c:" + std::to_string(i));
    ASSERT_TRUE(h);
    last = h->fencing_token();
    EXPECT_TRUE(b->release(*h));
  }
  ASSERT_TRUE(server_->restart());  // loads the snapshot: the counter goes back three grants
  raw_ = std::make_unique<Raw>(server_->uri());
  auto after = grant_within(*b, "snap", "c:4", 3s);
  ASSERT_TRUE(after) << "never granted after the restart";
  EXPECT_GT(after->fencing_token(), last) << "a token was issued twice";
}

TEST_F(RedisHardeningTest, TokensKeepIncreasingWhenTheCounterGoesBack) {
  // The same without a restart: the counter restored by hand to an older value.
  auto b = backend();
  auto first = grant(*b, "back", "c:a");
  ASSERT_TRUE(first);
  const auto old = raw_->string({"GET", counter_key("back")});
  ASSERT_TRUE(old);
  EXPECT_TRUE(b->release(*first));
  auto second = grant(*b, "back", "c:b");
  ASSERT_TRUE(second);
  EXPECT_TRUE(b->release(*second));
  raw_->cmd({"SET", counter_key("back"), *old});
  auto third = grant(*b, "back", "c:c");
  ASSERT_TRUE(third);
  EXPECT_GT(third->fencing_token(), second->fencing_token());
}

// --- 2. data loss without a run_id change, and new processes -------------------------------

TEST_F(RedisHardeningTest, AfterFlushallNobodyIsGrantedForTheGrace) {
  auto holder = backend("restart_grace=800ms");
  auto h = grant(*holder, "fl", "c:old", 5s);
  ASSERT_TRUE(h);
  raw_->cmd({"FLUSHALL"});  // the run_id stays the same
  // A process that never saw the lock (a new `dlock run`) must not get it while the old
  // holder may still be working.
  auto newcomer = backend("restart_grace=800ms");
  const auto start = Clock::now();
  auto a = Acquire(*newcomer, Req{"fl", "c:new"}).attempt();
  ASSERT_TRUE(std::holds_alternative<spi::Busy>(a)) << "granted right after FLUSHALL";
  auto retry = std::get<spi::Busy>(a).retry_after;
  ASSERT_TRUE(retry);
  EXPECT_GT(*retry, 500ms);
  EXPECT_LE(*retry, 800ms);
  EXPECT_FALSE(grant(*holder, "other-name", "c:old")) << "the pause covers every name";
  // The old holder learns its loss at its next renewal.
  spi::HeldLock* locks[] = {h.get()};
  spi::RenewStatus out[1];
  holder->extend_many(locks, 5s, out);
  EXPECT_EQ(out[0], spi::RenewStatus::not_held);
  auto g = grant_within(*newcomer, "fl", "c:new", 2s);
  ASSERT_TRUE(g);
  EXPECT_GE(Clock::now() - start, 700ms);
  EXPECT_GT(g->fencing_token(), h->fencing_token());
}

TEST_F(RedisHardeningTest, AfterARestartFromAnOlderSnapshotNoReleaseOrAbandonHandsTheLockOver) {
  // The snapshot has A's hold; A released after it and X took the lock: X is the real holder,
  // which the restarted server forgot. Waiters queue under A's restored hold (their first
  // attempt under a writer only queues). Neither the release of A's restored hold (a release
  // whose reply was lost in the restart, sent again) nor a waiter that gives up may hand the
  // lock to a waiter during the pause: X still believes it holds it.
  auto b = backend("restart_grace=1500ms");
  auto a = grant(*b, "dl", "c:a");
  ASSERT_TRUE(a);
  ASSERT_EQ(raw_->string({"SAVE"}), "OK");
  EXPECT_TRUE(b->release(*a));
  auto x = grant(*b, "dl", "c:x");
  ASSERT_TRUE(x);
  ASSERT_TRUE(server_->restart());  // A's hold is back, X's is gone, and the run_id is new
  raw_ = std::make_unique<Raw>(server_->uri());
  ASSERT_TRUE(raw_->holds(lock_key("dl"), "c:a")) << "the snapshot did not restore A's hold";

  auto waiters = backend("restart_grace=1500ms");
  const auto restarted = Clock::now();
  auto y = std::make_unique<Acquire>(*waiters, Req{"dl", "c:y", LockMode::exclusive, 10s, false, true});
  EXPECT_FALSE(y->try_get());
  Acquire z(*waiters, Req{"dl", "c:z", LockMode::exclusive, 10s, false, true});
  EXPECT_FALSE(z.try_get());

  EXPECT_TRUE(b->release(*a));  // frees A's restored hold
  EXPECT_FALSE(raw_->holds(lock_key("dl"), "c:y")) << "the release handed the lock over during the pause";
  y.reset();  // Y gives up
  EXPECT_FALSE(raw_->holds(lock_key("dl"), "c:z")) << "the abandon handed the lock over during the pause";
  EXPECT_FALSE(z.try_get()) << "granted during the pause";
  EXPECT_EQ(raw_->integer({"EXISTS", lock_key("dl")}), 0) << "somebody holds the lock during the pause";
  // The waiter left takes the lock once the pause is over (its refreshes: nobody tells it).
  HeldPtr got;
  while (!got && Clock::now() - restarted < 3s) {
    std::this_thread::sleep_for(20ms);
    got = z.try_get();
  }
  ASSERT_TRUE(got) << "the waiter never got the lock after the pause";
  EXPECT_GE(Clock::now() - restarted, 1400ms) << "granted before the pause was over";
  EXPECT_GT(got->fencing_token(), x->fencing_token());
}

TEST_F(RedisHardeningTest, AfterARestartWithoutPersistenceANewProcessWaitsToo) {
  auto holder = backend("restart_grace=800ms");
  ASSERT_TRUE(grant(*holder, "rp", "c:old", 5s));
  ASSERT_TRUE(server_->restart());
  raw_ = std::make_unique<Raw>(server_->uri());
  auto newcomer = backend("restart_grace=800ms");
  auto a = Acquire(*newcomer, Req{"rp", "c:new"}).attempt();
  ASSERT_TRUE(std::holds_alternative<spi::Busy>(a)) << "a new process was granted at once";
  EXPECT_TRUE(grant_within(*newcomer, "rp", "c:new", 2s));
}

TEST_F(RedisHardeningTest, AFreshDatasetWaitsOnceAndTheMarkerIsKept) {
  // The documented cost: a server that has no marker cannot be told from one that lost its
  // data, so the first acquire under a prefix waits the grace once.
  lose_the_marker();
  auto b = backend("restart_grace=400ms");
  EXPECT_FALSE(grant(*b, "fresh", "c:a"));
  EXPECT_EQ(raw_->integer({"PTTL", "dlock:epoch"}), -1) << "the marker must not expire";
  auto g = grant_within(*b, "fresh", "c:a", 2s);
  ASSERT_TRUE(g);
  EXPECT_TRUE(b->release(*g));
  EXPECT_TRUE(grant(*b, "fresh2", "c:a")) << "waited again although nothing was lost";
  // restart_grace=0 opts out.
  lose_the_marker();
  EXPECT_TRUE(grant(*backend("restart_grace=0"), "fresh3", "c:a"));
}

// --- 3. eviction ------------------------------------------------------------------------------

TEST_F(RedisHardeningTest, AnEvictingServerIsRefusedUnlessAllowed) {
  for (const char* policy : {"volatile-lru", "allkeys-lru", "volatile-ttl", "allkeys-random"}) {
    raw_->cmd({"CONFIG", "SET", "maxmemory-policy", policy});
    auto [code, message] = open_error(server_->uri());
    EXPECT_EQ(code, ErrorCode::invalid_argument) << policy;
    EXPECT_NE(message.find(policy), std::string::npos) << message;
    EXPECT_NE(message.find("maxmemory-policy noeviction"), std::string::npos) << message;
    EXPECT_NE(message.find("allow_eviction=true"), std::string::npos) << message;
  }
  auto p = dlock::open(server_->uri() + "?allow_eviction=true");
  EXPECT_TRUE(p->try_lock("ev"));
  raw_->cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  EXPECT_TRUE(dlock::open(server_->uri())->try_lock("ev2"));
}

// --- 5. release and abandon when the server is out of memory ---------------------------------

TEST_F(RedisHardeningTest, ReleaseAndAbandonSucceedOutOfMemory) {
  auto b = backend();
  auto h = grant(*b, "oom", "c:h");
  ASSERT_TRUE(h);
  auto waiter = std::make_unique<Acquire>(*b, Req{"oom", "c:w", LockMode::exclusive, 10s, false, true});
  EXPECT_FALSE(waiter->try_get());  // queued
  raw_->cmd({"CONFIG", "SET", "maxmemory", "1"});
  EXPECT_TRUE(b->release(*h)) << "release refused when out of memory";
  EXPECT_FALSE(raw_->holds(lock_key("oom"), "c:h"));
  // The release handed the lock to the waiter; it gives up without picking it up.
  waiter.reset();
  EXPECT_EQ(raw_->integer({"EXISTS", lock_key("oom")}), 0) << "the abandoned grant stayed";
  EXPECT_EQ(raw_->integer({"EXISTS", LockKeys("dlock:", "oom").queue}), 0);
  raw_->cmd({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_TRUE(grant(*b, "oom", "c:x"));
}

TEST_F(RedisHardeningTest, AbandonSucceedsOutOfMemory) {
  auto b = backend();
  auto h = grant(*b, "oom2", "c:h");
  ASSERT_TRUE(h);
  auto waiter = std::make_unique<Acquire>(*b, Req{"oom2", "c:w", LockMode::exclusive, 10s, true, true});
  EXPECT_FALSE(waiter->try_get());
  raw_->cmd({"CONFIG", "SET", "maxmemory", "1"});
  waiter.reset();
  raw_->cmd({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(raw_->integer({"EXISTS", LockKeys("dlock:", "oom2").queue}), 0) << "the queue entry stayed";
}

// --- 6. nothing half-written ------------------------------------------------------------------

TEST_F(RedisHardeningTest, ABadCounterLeavesNoOrphanHold) {
  auto b = backend();
  for (const char* bad : {"not-a-number", "9223372036854775807", "1.5"}) {
    raw_->cmd({"SET", counter_key("bad"), bad});
    try {
      grant(*b, "bad", "c:a");
      ADD_FAILURE() << "granted with counter " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("fencing counter"), std::string::npos) << e.what();
    }
    EXPECT_EQ(raw_->integer({"EXISTS", lock_key("bad")}), 0) << "orphan hold after counter " << bad;
  }
}

TEST_F(RedisHardeningTest, AReleaseThatCannotHandOverChangesNothing) {
  auto b = backend();
  auto h = grant(*b, "bad2", "c:h");
  ASSERT_TRUE(h);
  auto waiter = queued_writer(*b, "bad2", "c:w");
  raw_->cmd({"SET", counter_key("bad2"), "garbage"});
  EXPECT_THROW(b->release(*h), Error);
  EXPECT_TRUE(raw_->holds(lock_key("bad2"), "c:h")) << "half a release";
  EXPECT_FALSE(raw_->holds(lock_key("bad2"), "c:w")) << "granted without a token";
  raw_->cmd({"DEL", counter_key("bad2")});
  EXPECT_TRUE(b->release(*h));
}

// A release during the pause after data loss takes the queue's head off and puts it back.
// With one waiter queued that emptied the queue, and the put-back made it anew: without a
// TTL, a waiter that then died stayed at its head for good (review s35, finding 1).
TEST_F(RedisHardeningTest, AReleaseDuringThePauseLeavesTheQueueWithItsTtl) {
  auto b = backend("restart_grace=5s");
  auto h = grant(*b, "pq", "c:h");
  ASSERT_TRUE(h);
  auto waiter = queued_writer(*b, "pq", "c:w");
  lose_the_marker();
  EXPECT_TRUE(b->release(*h));  // during the pause: handed to nobody
  const LockKeys k("dlock:", "pq");
  ASSERT_EQ(raw_->integer({"ZCARD", k.queue}), 1) << "the waiter lost its place";
  EXPECT_GT(raw_->integer({"PTTL", k.queue}), 0) << "a queue that outlives its waiters";
}

// The put-back during the pause must not shorten the queue's TTL: the releaser's
// fair_heartbeat may be shorter than the waiters' (review s35 b, F1: the queue then expired
// with its waiters, and a newcomer took the lock after the pause).
TEST_F(RedisHardeningTest, AReleaseDuringThePauseKeepsTheWaitersQueueTtl) {
  auto quick = backend("restart_grace=5s&fair_heartbeat=50ms");
  auto b = backend("restart_grace=5s");
  auto h = grant(*quick, "pk", "c:h");
  ASSERT_TRUE(h);
  auto a = queued_writer(*b, "pk", "c:a");
  auto c = queued_writer(*b, "pk", "c:c");
  const LockKeys k("dlock:", "pk");
  const long long before = raw_->integer({"PTTL", k.queue});
  ASSERT_GT(before, 2000);
  lose_the_marker();
  EXPECT_TRUE(quick->release(*h));  // during the pause: handed to nobody
  EXPECT_EQ(raw_->integer({"ZCARD", k.queue}), 2);
  EXPECT_GT(raw_->integer({"PTTL", k.queue}), before - 1000) << "the release cut the waiters' queue TTL";
}

// A waiter's refreshes during the pause keep its place: the queue lives 3 heartbeats, and a
// longer pause lost it with every waiter (review s35 b, F2).
TEST_F(RedisHardeningTest, WaitersKeepTheirPlacesThroughALongPause) {
  auto b = backend("restart_grace=1500ms&fair_heartbeat=100ms");
  auto h = grant(*b, "lp", "c:h");
  ASSERT_TRUE(h);
  auto w = queued_writer(*b, "lp", "c:w");
  lose_the_marker();
  EXPECT_TRUE(b->release(*h));  // during the pause: handed to nobody
  const auto end = Clock::now() + 1s;  // more than 3 heartbeats, less than the pause
  while (Clock::now() < end) {
    EXPECT_FALSE(w->try_get()) << "granted during the pause";  // its refresh
    std::this_thread::sleep_for(30ms);
  }
  EXPECT_EQ(raw_->integer({"ZCARD", LockKeys("dlock:", "lp").queue}), 1) << "the waiter lost its place";
}

// A queue entry that is no waiter (written by hand, a corrupted key) and starts with "x"
// must not keep the releasing writer's hold: readers queued behind are granted next
// (review s35, finding 3).
TEST_F(RedisHardeningTest, ABadQueueEntryDoesNotKeepTheReleasedHold) {
  auto b = backend();
  auto h = grant(*b, "bq", "c:h");
  ASSERT_TRUE(h);
  const LockKeys k("dlock:", "bq");
  raw_->cmd({"ZADD", k.queue, "1", "x-not-a-waiter"});
  Acquire reader(*b, Req{"bq", "c:r", LockMode::shared, 10s, false, true});
  EXPECT_FALSE(reader.try_get());  // queued behind the bad entry
  EXPECT_TRUE(b->release(*h));
  EXPECT_FALSE(raw_->holds(k.hold, "c:h")) << "the released writer still holds the lock";
  EXPECT_TRUE(raw_->holds(k.hold, "c:r")) << "the reader behind the bad entry was not granted";
}

// A lock key of another type (an older dlock's hash hold, a key written by hand) is not held
// by us: it must not fail the renewal of the other locks in the batch (review s35, finding 2).
TEST_F(RedisHardeningTest, AForeignLockKeyDoesNotFailTheBatch) {
  auto b = backend();
  auto a = grant(*b, "fa", "c:a", 2s);
  auto c = grant(*b, "fc", "c:c", 2s);
  ASSERT_TRUE(a && c);
  raw_->cmd({"DEL", lock_key("fc")});
  raw_->cmd({"HSET", lock_key("fc"), "mode", "w", "c:c", "1"});
  spi::HeldLock* locks[] = {a.get(), c.get()};
  spi::RenewStatus out[2];
  b->extend_many(locks, 30s, out);
  EXPECT_EQ(out[0], spi::RenewStatus::renewed) << "one foreign key failed the whole batch";
  EXPECT_EQ(out[1], spi::RenewStatus::not_held);

}

TEST_F(RedisHardeningTest, MissingAclRightsAreNamedAtConnect) {
  const std::string path = server_->socket();
  // A user denied BLPOP/RPUSH would fail only once a release had already handed the lock
  // over (to a waiter that cannot see its grant).
  raw_->cmd({"ACL", "SETUSER", "noblock", "on", ">nb-pw", "~*", "+@all", "-blpop", "-rpush"});
  auto [code, message] = open_error("redis+unix://noblock:nb-pw@" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("BLPOP"), std::string::npos) << message;
  EXPECT_NE(message.find("RPUSH"), std::string::npos) << message;
  EXPECT_NE(message.find("dlock:{"), std::string::npos) << "names the key: " << message;
  EXPECT_EQ(message.find("nb-pw"), std::string::npos) << "password leaked: " << message;

  raw_->cmd({"ACL", "SETUSER", "otherkeys", "on", ">ok-pw", "~app:*", "&*", "+@all"});
  std::tie(code, message) = open_error("redis+unix://otherkeys:ok-pw@" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("key"), std::string::npos) << message;
  EXPECT_NE(message.find("dlock:"), std::string::npos) << message;

  raw_->cmd({"ACL", "SETUSER", "nozadd", "on", ">nz-pw", "~*", "&*", "+@all", "-zadd"});
  std::tie(code, message) = open_error("redis+unix://nozadd:nz-pw@" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("ZADD"), std::string::npos) << message;

  // Every acquire reads the data-loss marker and the fencing counter with one MGET.
  raw_->cmd({"ACL", "SETUSER", "nomget", "on", ">ng-pw", "~*", "&*", "+@all", "-mget"});
  std::tie(code, message) = open_error("redis+unix://nomget:ng-pw@" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("MGET"), std::string::npos) << message;

  // Exactly what the README lists is enough.
  raw_->cmd({"ACL", "SETUSER", "minimal", "on", ">m-pw", "~dlock:*", "+@all", "-@dangerous",
             "+info"});
  auto p = dlock::open("redis+unix://minimal:m-pw@" + path);
  EXPECT_TRUE(p->try_lock("acl"));
}

// --- 9. a stalled server while waiting -----------------------------------------------------

TEST_F(RedisHardeningTest, AWaitRidesOutAStalledServer) {
  // Every reply times out for 1.5 s (CLIENT PAUSE holds every script): a caller that waits
  // 6 s must keep trying (transient `unavailable`), not fail on the first timeout.
  const std::string params = "?command_timeout=200ms&connect_timeout=200ms&lease=3s";
  auto holder = dlock::open(server_->uri() + params);
  auto waiter = dlock::open(server_->uri() + params);
  auto held = holder->try_lock("stall");
  ASSERT_TRUE(held);
  std::thread stall([&] {
    std::this_thread::sleep_for(200ms);
    Raw(server_->uri()).cmd({"CLIENT", "PAUSE", "1500", "WRITE"});
    std::this_thread::sleep_for(1800ms);
    held->release();
  });
  const auto start = Clock::now();
  try {
    auto got = waiter->try_lock("stall", Wait::for_duration(6s));
    EXPECT_TRUE(got) << "not granted after the stall";
    EXPECT_GE(Clock::now() - start, 1500ms);
  } catch (const Error& e) {
    ADD_FAILURE() << "the wait failed on a transient error: " << e.what();
  }
  stall.join();
}

// A server that stops answering for `stall` (DEBUG SLEEP: it reads nothing meanwhile, then
// runs every request that waited in its sockets, those of connections the client dropped
// too), from `after` on.
class Stall {
 public:
  Stall(const PrivateServer& server, std::chrono::milliseconds stall, std::chrono::milliseconds after = 100ms) {
    const std::string seconds = std::to_string(static_cast<double>(stall.count()) / 1000.0);
    thread_ = std::thread([uri = server.uri(), seconds, after] {
      Raw raw(uri + "?command_timeout=60s");
      std::this_thread::sleep_for(after);
      raw.cmd({"DEBUG", "SLEEP", seconds});
    });
    std::this_thread::sleep_for(after + 50ms);  // the DEBUG SLEEP has reached the server
  }
  ~Stall() { over(); }
  // Returns when the server answers again.
  void over() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

// Polls for up to `limit` until `key` is gone; how long that took, or nullopt if it stayed.
std::optional<std::chrono::milliseconds> gone_within(Raw& raw, const std::string& key,
                                                     std::chrono::milliseconds limit) {
  const auto start = Clock::now();
  for (;;) {
    if (raw.integer({"EXISTS", key}) == 0) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    }
    if (Clock::now() - start > limit) return std::nullopt;
    std::this_thread::sleep_for(10ms);
  }
}

TEST_F(RedisHardeningTest, ATryOnceAcquireCutOffByAStalledServerLeavesNoHoldBehind) {
  // The acquire's reply times out (the server is stalled); the server runs the request when
  // it comes back. The caller was told `unavailable`: the hold that request makes is nobody's
  // and must be undone, not left to block the lock for its lease.
  PrivateServer stalling({"--enable-debug-command", "local"});
  ASSERT_TRUE(stalling.running());
  Raw raw(stalling.uri());
  mark_dataset(raw, "dlock:");
  auto b = std::make_unique<RedisBackend>(
      parse_options(Uri::parse(stalling.uri() + "?command_timeout=500ms&connect_timeout=500ms")));
  Stall stall(stalling, 2s);
  const auto start = Clock::now();
  {
    Acquire a(*b, Req{"ph", "c:gone", LockMode::exclusive, 20s});
    try {
      a.attempt();
      ADD_FAILURE() << "the attempt answered during the stall";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
    }
    // One command timeout: a server that does not answer is not asked again at once.
    EXPECT_LT(Clock::now() - start, 900ms) << "the timed-out request was retried";
  }  // gives up
  EXPECT_LT(Clock::now() - start, 1000ms) << "giving up blocked on the stalled server";
  stall.over();
  const auto left = gone_within(raw, lock_key("ph"), 3s);
  EXPECT_TRUE(left) << "a hold nobody owns stayed after the stall, PTTL "
                    << raw.integer({"PTTL", lock_key("ph")}) << " ms";
  if (left) {
    EXPECT_LT(*left, 1500ms);
  }
  EXPECT_TRUE(grant(*b, "ph", "c:next")) << "the lock is not free after the stall";
}

// A 100 ms wait of `p` (command_timeout=500ms) for `name` while `stalling` does not answer:
// it returns within one command timeout (not two), and what its request leaves on the
// server when the server answers again (a hold nobody owns, a queue entry) is undone.
void expect_a_wait_during_a_stall_to_overrun_one_timeout(const PrivateServer& stalling, Raw& raw,
                                                         ILockProvider& p, const std::string& name) {
  const LockKeys keys("dlock:", name);
  Stall stall(stalling, 2500ms);
  const auto start = Clock::now();
  try {
    auto got = p.try_lock(name, Wait::for_duration(100ms));
    EXPECT_FALSE(got) << "granted during the stall";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  const auto took = Clock::now() - start;
  EXPECT_LT(took, 900ms) << "took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms for a 100 ms wait with command_timeout=500ms";
  stall.over();
  const auto left = gone_within(raw, keys.hold, 3s);
  EXPECT_TRUE(left) << "a hold nobody owns stayed after the stall, PTTL "
                    << raw.integer({"PTTL", keys.hold}) << " ms";
  if (left) {
    EXPECT_LT(*left, 1500ms);
  }
  EXPECT_EQ(raw.integer({"EXISTS", keys.queue}), 0) << "a queue entry stayed";
  auto other = dlock::open(stalling.uri());
  EXPECT_TRUE(other->try_lock(name)) << "the lock is not free after the stall";
}

TEST_F(RedisHardeningTest, AWaitThatEndsDuringAStallLeavesNothingBehindAndOverrunsOneTimeout) {
  // A caller that waits 100 ms while the server is stalled: its attempt times out once (not
  // twice), it gives up while the server still does not answer (so its abandon cannot run
  // then), and the hold its request makes when the server comes back is undone.
  PrivateServer stalling({"--enable-debug-command", "local"});
  ASSERT_TRUE(stalling.running());
  Raw raw(stalling.uri());
  mark_dataset(raw, "dlock:");
  auto p = dlock::open(stalling.uri() + "?command_timeout=500ms&connect_timeout=500ms");
  ASSERT_TRUE(p->try_lock("warm-up"));
  expect_a_wait_during_a_stall_to_overrun_one_timeout(stalling, raw, *p, "pw");
}

TEST_F(RedisHardeningTest, AWaitOnABusyNameThatMeetsAStallOverrunsOneTimeout) {
  // The same on a name this process found busy before: its wait starts with the silent
  // attempt on a wait connection of its own, which may have to be opened first.
  PrivateServer stalling({"--enable-debug-command", "local"});
  ASSERT_TRUE(stalling.running());
  Raw raw(stalling.uri());
  mark_dataset(raw, "dlock:");
  auto p = dlock::open(stalling.uri() + "?command_timeout=500ms&connect_timeout=500ms");
  {
    auto other = dlock::open(stalling.uri());
    auto held = other->try_lock("pb");
    ASSERT_TRUE(held);
    EXPECT_FALSE(p->try_lock("pb", Wait::for_duration(50ms))) << "granted while held";
  }  // released: "pb" is a name p found busy
  expect_a_wait_during_a_stall_to_overrun_one_timeout(stalling, raw, *p, "pb");
}

TEST_F(RedisHardeningTest, ALateUndoOfAStalledAttemptNeverTakesTheLockFromTheRetriedAcquire) {
  // A waiter's attempts time out during a stall: each is undone by the clean-up thread once
  // the server answers again, late. Meanwhile the wait goes on with a new acquisition, which
  // the holder's release hands the lock to. A late undo must not take that grant away (and
  // hand the lock to the next caller while the waiter still believes it holds it).
  PrivateServer stalling({"--enable-debug-command", "local"});
  ASSERT_TRUE(stalling.running());
  Raw raw(stalling.uri());
  mark_dataset(raw, "dlock:");
  auto holder = dlock::open(stalling.uri() + "?command_timeout=10s");
  auto other = dlock::open(stalling.uri() + "?command_timeout=10s");
  auto waiter = dlock::open(stalling.uri() + "?command_timeout=200ms&connect_timeout=200ms&fair_heartbeat=300ms");
  auto held = holder->try_lock("ur");
  ASSERT_TRUE(held);
  std::optional<Lease> got;
  {
    // Long enough for the undos' backoff to grow past the wait's retries (1 s at most).
    Stall stall(stalling, 2s);
    std::thread wait([&] { got = waiter->try_lock("ur", Wait::for_duration(6s)); });
    stall.over();
    std::this_thread::sleep_for(100ms);  // some undos have run, others wait for their retry
    held->release();
    wait.join();
  }
  ASSERT_TRUE(got) << "the waiter was never granted";
  // The undos retry within a second (their longest backoff): all have run by the end of this.
  auto next = other->try_lock("ur", Wait::for_duration(1500ms));
  EXPECT_FALSE(next) << "granted to another caller while the waiter holds the lock (its lease "
                     << (got->held() ? "valid" : "lost") << ", tokens " << got->fencing_token() << " and "
                     << (next ? next->fencing_token() : 0) << ")";
  EXPECT_TRUE(got->held());
  EXPECT_TRUE(got->release()) << "the waiter's hold was taken from it";
}

TEST_F(RedisHardeningTest, ADroppedLeaseWhoseReleaseFailedDuringAPauseIsFreedSoonAfterIt) {
  // CLIENT PAUSE (what a failover uses) holds every request for 600 ms: the release times
  // out, and the lease is dropped, so the core releases it in the background, which fails
  // too while the pause lasts. The hold must not then sit on the server for its whole lease
  // (30 s) with nobody to release it: it is released once the server answers again.
  auto p = dlock::open(server_->uri() + "?command_timeout=200ms&connect_timeout=200ms");
  auto held = p->try_lock("rp");
  ASSERT_TRUE(held);
  Raw pauser(server_->uri());
  pauser.cmd({"CLIENT", "PAUSE", "600"});
  const auto paused = Clock::now();
  try {
    held->release();
    ADD_FAILURE() << "released during the pause";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  held.reset();  // dropped: released in the background, which fails while the pause lasts
  std::this_thread::sleep_until(paused + 700ms);
  const auto left = gone_within(*raw_, lock_key("rp"), 4s);
  EXPECT_TRUE(left) << "the dropped hold stayed after the pause, PTTL " << raw_->integer({"PTTL", lock_key("rp")})
                    << " ms";
  auto other = dlock::open(server_->uri());
  EXPECT_TRUE(other->try_lock("rp")) << "the lock is not free after the pause";
}

TEST_F(RedisHardeningTest, ARenewalThatRunsAfterTheHolderGaveUpLeavesNoHoldBehind) {
  // A renewal waits at most until the client's estimate of the lease's end, which is early
  // (taken before the acquire left, less the drift allowance). A server that wakes between
  // that estimate and its own end still runs the renewal: the hold is renewed for a full
  // lease after the core gave it up (lost signal fired, background release skipped past the
  // estimate). Nobody holds it then; it must not block the lock for that lease.
  PrivateServer stalling({"--enable-debug-command", "local"});
  ASSERT_TRUE(stalling.running());
  Raw raw(stalling.uri());
  mark_dataset(raw, "dlock:");
  auto p = dlock::open(stalling.uri() + "?lease=1500ms&fair_heartbeat=500ms");
  Raw sleeper(stalling.uri() + "?command_timeout=60s");
  std::optional<Lease> held;
  Clock::time_point sent;
  {
    // The acquire waits ~450 ms in the server: its lease ends that much after the estimate
    // (sent + 1483 ms), at about sent + 1950 ms.
    Stall first(stalling, 500ms, 0ms);
    sent = Clock::now();
    held = p->try_lock("rn");
  }
  ASSERT_TRUE(held);
  // The watchdog renews at about sent + 950 ms; the server sleeps from sent + 850 ms to
  // sent + 1700 ms: the renewal's wait is cut at the estimate, the server runs it after.
  std::thread second([&] {
    std::this_thread::sleep_until(sent + 850ms);
    sleeper.cmd({"DEBUG", "SLEEP", "0.85"});
  });
  second.join();
  EXPECT_FALSE(held->held()) << "the holder was not told it lost the lock";
  const auto left = gone_within(raw, lock_key("rn"), 3s);
  EXPECT_TRUE(left) << "the lock stayed held by nobody";
  if (left) {
    EXPECT_LT(*left, 400ms) << "the given-up hold stayed " << left->count()
                            << " ms after the server woke (a late renewal re-armed it)";
  }
  EXPECT_TRUE(dlock::open(stalling.uri())->try_lock("rn")) << "the lock is not free";
}

// --- 7. fencing counters expire, tokens keep increasing --------------------------------------

TEST_F(RedisHardeningTest, CountersExpireAndTokensKeepIncreasing) {
  auto b = backend();
  auto h = grant(*b, "exp", "c:a", 100ms);
  ASSERT_TRUE(h);
  const long long ttl = raw_->integer({"PTTL", counter_key("exp")});
  EXPECT_GT(ttl, 0) << "the counter never expires";
  EXPECT_LE(ttl, 1000);
  EXPECT_TRUE(b->release(*h));
  for (int i = 0; i < 150 && raw_->integer({"EXISTS", counter_key("exp")}) == 1; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(raw_->integer({"EXISTS", counter_key("exp")}), 0) << "the counter did not expire";
  auto again = grant(*b, "exp", "c:b", 100ms);
  ASSERT_TRUE(again);
  EXPECT_GT(again->fencing_token(), h->fencing_token());
}

}  // namespace
}  // namespace dlock::redis::test
