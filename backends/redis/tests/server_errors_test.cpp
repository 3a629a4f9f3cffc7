// Server-side failures on a private redis-server (unix socket) that the tests may
// reconfigure freely: authentication (password and ACL user), a missing db, READONLY, OOM,
// NOSCRIPT after SCRIPT FLUSH, killed connections, and the renewal round-trip count.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "keys.h"
#include "test_server.h"

namespace dlock::redis::test {
namespace {

using namespace std::chrono_literals;

class RedisServerErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(shared_uri().empty()) << kNoServerMessage;
    server_ = std::make_unique<PrivateServer>();
    ASSERT_TRUE(server_->running()) << "could not start a private redis-server (is it installed?)";
    raw_ = std::make_unique<Raw>(server_->uri());
    mark_dataset(*raw_, "dlock:");
  }

  std::unique_ptr<RedisBackend> backend(const std::string& uri) {
    return std::make_unique<RedisBackend>(parse_options(Uri::parse(uri)));
  }
  // A try-once acquire: the grant or null.
  static HeldPtr grant(RedisBackend& b, std::string_view name, std::string_view owner) {
    return Acquire(b, Req{std::string(name), std::string(owner)}).try_get();
  }
  static std::pair<ErrorCode, std::string> open_error(const std::string& uri) {
    try {
      dlock::open(uri);
    } catch (const Error& e) {
      return {e.code(), e.what()};
    }
    ADD_FAILURE() << "opened " << uri;
    return {ErrorCode::internal, ""};
  }
  long long evalsha_calls() {
    auto info = raw_->string({"INFO", "commandstats"}).value_or("");
    auto at = info.find("cmdstat_evalsha:calls=");
    if (at == std::string::npos) return 0;
    return std::stoll(info.substr(at + 22));
  }

  std::unique_ptr<PrivateServer> server_;
  std::unique_ptr<Raw> raw_;
};

TEST_F(RedisServerErrorsTest, PasswordAuthentication) {
  raw_->cmd({"CONFIG", "SET", "requirepass", "s3cret-pw"});
  const std::string path = server_->socket();
  auto [code, message] = open_error("redis+unix://" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("authentication required"), std::string::npos) << message;

  std::tie(code, message) = open_error("redis+unix://:wrong-pw@" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("authentication failed"), std::string::npos) << message;
  EXPECT_EQ(message.find("wrong-pw"), std::string::npos) << "password leaked: " << message;

  auto p = dlock::open("redis+unix://:s3cret-pw@" + path);
  EXPECT_EQ(p->uri().find("s3cret-pw"), std::string::npos) << p->uri();
  EXPECT_TRUE(p->try_lock("a"));
}

TEST_F(RedisServerErrorsTest, AclUserAuthentication) {
  raw_->cmd({"ACL", "SETUSER", "locker", "on", ">locker-pw", "~*", "&*", "+@all"});
  const std::string path = server_->socket();
  auto [code, message] = open_error("redis+unix://locker:bad-pw@" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("authentication failed"), std::string::npos) << message;
  EXPECT_EQ(message.find("bad-pw"), std::string::npos) << "password leaked: " << message;
  auto p = dlock::open("redis+unix://locker:locker-pw@" + path);
  EXPECT_TRUE(p->try_lock("a"));
  // A user the ACL denies INFO still works (without restart detection).
  raw_->cmd({"ACL", "SETUSER", "noinfo", "on", ">ni-pw", "~*", "&*", "+@all", "-info"});
  auto q = dlock::open("redis+unix://noinfo:ni-pw@" + path);
  EXPECT_TRUE(q->try_lock("b"));
  // A user that may not run scripts: a clear permission error, not a crash.
  raw_->cmd({"ACL", "SETUSER", "noscripts", "on", ">ns-pw", "~*", "&*", "+@all", "-@scripting"});
  std::tie(code, message) = open_error("redis+unix://noscripts:ns-pw@" + path);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("permission"), std::string::npos) << message;
}

TEST_F(RedisServerErrorsTest, MissingDatabase) {
  auto [code, message] = open_error(server_->uri() + "?db=4000");
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(message.find("database"), std::string::npos) << message;
  raw_->cmd({"SELECT", "3"});
  mark_dataset(*raw_, "d3:");
  raw_->cmd({"SELECT", "0"});
  auto p = dlock::open(server_->uri() + "?db=3&prefix=d3:");
  auto held = p->try_lock("x");
  EXPECT_TRUE(held);
  EXPECT_EQ(raw_->integer({"EXISTS", "d3:{x}"}), 0);  // not in db 0
  raw_->cmd({"SELECT", "3"});
  EXPECT_EQ(raw_->integer({"EXISTS", "d3:{x}"}), 1);
}

TEST_F(RedisServerErrorsTest, ReadOnlyReplicaIsUnavailable) {
  auto b = backend(server_->uri());
  raw_->cmd({"REPLICAOF", "127.0.0.1", "1"});
  try {
    grant(*b, "ro", "c:o");
    ADD_FAILURE() << "a read-only replica granted a lock";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
  raw_->cmd({"REPLICAOF", "NO", "ONE"});
  EXPECT_TRUE(grant(*b, "ro", "c:o"));
}

TEST_F(RedisServerErrorsTest, OutOfMemoryIsUnavailable) {
  auto b = backend(server_->uri());
  raw_->cmd({"CONFIG", "SET", "maxmemory", "1"});
  try {
    grant(*b, "oom", "c:o");
    ADD_FAILURE() << "granted a lock on a full server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  raw_->cmd({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_TRUE(grant(*b, "oom", "c:o"));
}

TEST_F(RedisServerErrorsTest, ScriptFlushIsRecoveredFrom) {
  auto b = backend(server_->uri());
  auto h = grant(*b, "ns", "c:a");
  ASSERT_TRUE(h);
  raw_->cmd({"SCRIPT", "FLUSH"});
  spi::HeldLock* locks[] = {h.get()};
  spi::RenewStatus out[1];
  b->extend_many(locks, 20s, out);
  EXPECT_EQ(out[0], spi::RenewStatus::renewed);
  raw_->cmd({"SCRIPT", "FLUSH"});
  EXPECT_TRUE(b->release(*h));
  raw_->cmd({"SCRIPT", "FLUSH"});
  EXPECT_TRUE(grant(*b, "ns", "c:b"));
  {
    Acquire waiter(*b, {"ns", "c:c", LockMode::exclusive, 10s, false, true});
    EXPECT_FALSE(waiter.try_get());  // queued
    raw_->cmd({"SCRIPT", "FLUSH"});
  }  // gives up: the abandon script is loaded again and removes the entry
  EXPECT_EQ(raw_->integer({"EXISTS", "dlock:{ns}:q"}), 0);
}

TEST_F(RedisServerErrorsTest, KilledConnectionsAreReplaced) {
  auto b = backend(server_->uri());
  ASSERT_TRUE(grant(*b, "k1", "c:a"));
  // The server closes every client (as on a restart or a timeout): the pool notices the
  // closed idle connection and the next attempt simply works.
  raw_->cmd({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(grant(*b, "k2", "c:a"));
}

TEST_F(RedisServerErrorsTest, RightAfterEveryConnectionWasKilledReleaseAndTryOnceStillWork) {
  // The server closes every client (CLIENT KILL, a restart, a failover) while several pooled
  // connections sit idle, and the next requests come at once (no rest that would have the
  // pool check its idle connections): the retry must not take another dead one.
  auto b = backend(server_->uri());
  // Several pooled connections busy at once, so that several sit idle afterwards.
  auto warm = [&] {
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; ++i) {
      ts.emplace_back([&, i] {
        for (int j = 0; j < 30; ++j) {
          try {
            (void)grant(*b, "warm" + std::to_string(i), "c:w" + std::to_string(j));
          } catch (const Error&) {
            // Not what this test looks at (a connection killed in the previous round).
          }
        }
      });
    }
    for (auto& t : ts) t.join();
    const auto clients = raw_->string({"CLIENT", "LIST", "TYPE", "normal"}).value_or("");
    return std::count(clients.begin(), clients.end(), '\n') - 1;  // without raw_
  };
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto h = grant(*b, "kr", "c:h" + std::to_string(round));
    ASSERT_TRUE(h);
    ASSERT_GE(warm(), 2) << "fewer than 2 pooled connections";
    raw_->cmd({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    try {
      EXPECT_TRUE(b->release(*h));
    } catch (const Error& e) {
      ADD_FAILURE() << "release threw: " << e.what();
    }
    ASSERT_GE(warm(), 2) << "fewer than 2 pooled connections";
    raw_->cmd({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    try {
      EXPECT_TRUE(grant(*b, "kr2-" + std::to_string(round), "c:o"));
    } catch (const Error& e) {
      ADD_FAILURE() << "a try-once acquire threw: " << e.what();
    }
  }
}

TEST_F(RedisServerErrorsTest, AWaiterWhoseBlockingConnectionDropsIsWokenAndWaitsAgain) {
  auto b = backend(server_->uri());
  auto h = grant(*b, "sub", "c:h");
  ASSERT_TRUE(h);
  Acquire w(*b, {"sub", "c:w", LockMode::exclusive, 10s, false, true});
  EXPECT_FALSE(w.try_get());  // queued, blocked in BLPOP on its grant list
  EXPECT_GE(w.fallback_poll(), 500ms);
  raw_->cmd({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  // The waiter is woken to retry (a grant may have been missed).
  EXPECT_TRUE(w.woken(2s));
  // The woken waiter tries again (as the core does), blocks again, then sleeps.
  EXPECT_FALSE(w.try_get());
  EXPECT_GE(w.fallback_poll(), 500ms) << "no blocking wait after the reconnect";
  EXPECT_FALSE(w.woken(0ms));
  EXPECT_TRUE(b->release(*h));
  EXPECT_TRUE(w.woken(2s)) << "no wake-up after reconnecting";
  auto g = w.try_get();
  ASSERT_TRUE(g);
  EXPECT_TRUE(b->release(*g));
}

TEST_F(RedisServerErrorsTest, AHandedOverLockArrivesPickedUpWithItsFullLease) {
  auto b = backend(server_->uri());
  auto h = grant(*b, "ho", "c:h");
  ASSERT_TRUE(h);
  Acquire w(*b, {"ho", "c:w", LockMode::exclusive, 10s, false, true});
  EXPECT_FALSE(w.try_get());  // queues, blocks in BLPOP on its grant list
  EXPECT_TRUE(b->release(*h));  // hands the lock to w
  ASSERT_TRUE(w.woken(2s));
  const long long before = evalsha_calls();
  auto a = w.attempt();
  EXPECT_EQ(evalsha_calls() - before, 0) << "the grant came with the wake-up, picked up already";
  auto* held = std::get_if<HeldPtr>(&a);
  ASSERT_TRUE(held && *held);
  EXPECT_EQ(raw_->string({"GET", "dlock:{ho}:t"}), std::to_string((*held)->fencing_token()));
  EXPECT_TRUE(raw_->holds("dlock:{ho}", "c:w"));
  EXPECT_GT((*held)->expires_at(), std::chrono::steady_clock::now() + 9s);
  EXPECT_TRUE(b->release(**held));
}

TEST_F(RedisServerErrorsTest, AfterARestartNothingIsGrantedDuringTheGraceAndTokensKeepIncreasing) {
  auto b = backend(server_->uri() + "?restart_grace=700ms");
  auto before = grant(*b, "rs", "c:a");
  ASSERT_TRUE(before);
  ASSERT_TRUE(server_->restart());  // no persistence: the lock and its counter are gone
  raw_ = std::make_unique<Raw>(server_->uri());
  auto a = Acquire(*b, Req{"rs", "c:b"}).attempt();
  ASSERT_TRUE(std::holds_alternative<spi::Busy>(a)) << "granted while the old holder may not know";
  auto after = std::get<spi::Busy>(a).retry_after;
  ASSERT_TRUE(after);
  EXPECT_LE(*after, 700ms);
  // The pause is counted on the server from when the script ran, before its reply came.
  std::this_thread::sleep_for(*after + 10ms);
  auto g = grant(*b, "rs", "c:b");
  ASSERT_TRUE(g);
  EXPECT_GT(g->fencing_token(), before->fencing_token()) << "the token went back after the restart";
  // Once the pause is over, a provider that never saw the old server is not held up.
  EXPECT_TRUE(grant(*backend(server_->uri()), "rs2", "c:c"));
}

TEST_F(RedisServerErrorsTest, RenewalIsOneRoundTripPerHundredLocks) {
  auto b = backend(server_->uri());
  constexpr int kLocks = 1000;
  std::vector<HeldPtr> held;
  for (int i = 0; i < kLocks; ++i) {
    held.push_back(grant(*b, "n" + std::to_string(i), "c:o"));
    ASSERT_TRUE(held.back());
  }
  std::vector<spi::HeldLock*> ptrs;
  for (auto& h : held) ptrs.push_back(h.get());
  std::vector<spi::RenewStatus> out(kLocks);
  const long long before = evalsha_calls();
  b->extend_many(ptrs, 30s, out);
  EXPECT_EQ(evalsha_calls() - before, kLocks / 100);
  EXPECT_EQ(std::count(out.begin(), out.end(), spi::RenewStatus::renewed), kLocks);
}

}  // namespace
}  // namespace dlock::redis::test
