// Fencing tokens of advisory mode (sql.h): a sequence's nextval per grant, raised to the
// server clock by every new lock connection. These tests hold the claim that tokens only
// ever increase, across holders, modes and a crash that loses asynchronous commits.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dlock/open.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

using test::open_tagged;

TEST(PgFencing, TokensIncreaseAcrossHoldersAndModes) {
  const auto tag = test::fresh_tag();
  auto p = open_tagged(tag);
  auto q = open_tagged(tag);
  std::uint64_t last = 0;
  for (int i = 0; i < 50; ++i) {
    auto& provider = i % 2 ? *p : *q;
    auto l = i % 3 ? provider.try_lock("t") : provider.try_lock_shared("t");
    ASSERT_TRUE(l);
    EXPECT_GT(l->fencing_token(), last) << "grant " << i;
    last = l->fencing_token();
    EXPECT_TRUE(l->release());
  }
  // A busy try draws no token: the token subquery runs only after a grant.
  auto held = p->try_lock("t");
  ASSERT_TRUE(held);
  const auto drawn = [] { return test::admin("SELECT last_value FROM dlock_fence_token")[0][0]; };
  const std::string before_busy = drawn();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(q->try_lock("t"));
  EXPECT_EQ(drawn(), before_busy) << "busy tries advanced the token sequence";
  EXPECT_EQ(std::to_string(held->fencing_token()), before_busy);
  EXPECT_TRUE(held->release());
}

// The sequence's last advances live in WAL that was not flushed (synchronous_commit=off):
// a crash forgets them, and without the clock bump of new connections the sequence would
// hand out tokens again that stale holders still carry.
TEST(PgFencing, TokensIncreaseAcrossCrashRestart) {
  const auto tag = test::fresh_tag();
  std::uint64_t before = 0;
  {
    auto p = open_tagged(tag);
    for (int i = 0; i < 200; ++i) {  // a burst right before the crash: unflushed WAL
      auto l = p->try_lock("crash");
      ASSERT_TRUE(l);
      before = l->fencing_token();
      EXPECT_TRUE(l->release());
    }
    test::crash_server();
  }
  auto after = open_tagged(tag);
  auto l = after->try_lock("crash");
  ASSERT_TRUE(l);
  EXPECT_GT(l->fencing_token(), before) << "a token handed out again after a crash";
  EXPECT_TRUE(l->release());
}

}  // namespace
}  // namespace dlock::postgres
