// Integration tests of a release whose statement may have reached the server but got no
// answer (mariadbd SIGSTOPped, command_timeout 1 s). The server runs a statement already in
// its socket once it resumes, even when the client has closed the connection meanwhile, so
// such a release may have freed the lock: nothing may still say "held" afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "dlock/dlock.h"
#include "stalled_server_test.h"

namespace dlock::mysql::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class MysqlReleaseDoubtTest : public StalledServerTest {};

// M1 (review my, lease mode): the owner-checked UPDATE of a release gets no answer. The core
// kept the hold when release threw unavailable, but the server applied the UPDATE as soon as
// it resumed: another client got the lock while P's Lease said held(), and P's same owner
// re-entered the old hold. Afterwards the Lease must not be held, its lost signal must have
// fired before the server could run the UPDATE, and the same owner's try_lock, while another
// client holds the lock, must be busy.
TEST_F(MysqlReleaseDoubtTest, ALeaseReleaseWithoutAnAnswerLeavesNothingHeld) {
  const std::string params =
      "mode=lease&connect_timeout=1s&command_timeout=1s&session_timeout=10s";
  auto p = dlock::open(db_->uri(params));
  auto q = dlock::open(db_->uri(params));
  auto a = p->try_lock("a");  // the owner is this thread
  ASSERT_TRUE(a);
  std::atomic<bool> lost{false};
  a->on_lost([&] { lost = true; });
  std::optional<bool> released;
  std::string threw;
  {
    StoppedServer stopped(mariadbd_pid());
    ASSERT_TRUE(stopped.ok()) << "mariadbd did not stop";
    try {
      released = a->release();
    } catch (const Error& e) {
      threw = e.what();
    }
    EXPECT_EQ(threw, "") << "release() said it could not tell: the core keeps the hold";
    EXPECT_FALSE(a->held())
        << "the UPDATE may run once the server resumes, yet the Lease says held";
    EXPECT_TRUE(lost.load()) << "no lost signal before the server could run the UPDATE";
  }
  // The sent UPDATE runs on the resume (or the lease runs out after S = 10 s).
  std::optional<Lease> got;
  ASSERT_TRUE(grant_within(*q, "a", 12s, got)) << "q never got a";
  const auto again = p->try_lock("a");  // the same owner (this thread) as the old hold
  EXPECT_FALSE(again) << "the released hold was re-entered while q holds the lock";
  EXPECT_EQ(released, std::optional<bool>(false))
      << "the release could not tell whether its UPDATE ran";
}

}  // namespace
}  // namespace dlock::mysql::test
