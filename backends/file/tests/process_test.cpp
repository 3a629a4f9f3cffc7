// file:// across processes and over time: exclusion with another process, a SIGKILLed
// holder freeing the lock, fencing across a killed holder, the lost signal when the lock
// file is deleted, and push wake-up latency (well under the fallback poll).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "child_holder.h"
#include "dlock/dlock.h"
#include "temp_dir.h"
#include "test_util.h"

namespace dlock::file {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ChildHolder;
using testing::eventually;
using testing::range_state;

std::chrono::milliseconds ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

class FileProcess : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(FileProcess, ExcludesAnotherProcess) {
  auto p = dlock::open(dir_.uri());
  ChildHolder child(dir_.uri(), "x", "exclusive");
  EXPECT_FALSE(p->try_lock("x"));
  EXPECT_FALSE(p->try_lock_shared("x", Wait::for_duration(50ms)));
  EXPECT_TRUE(p->try_lock("y"));
}

TEST_F(FileProcess, SharesWithAnotherProcessReader) {
  auto p = dlock::open(dir_.uri());
  ChildHolder child(dir_.uri(), "r", "shared");
  auto mine = p->try_lock_shared("r");
  ASSERT_TRUE(mine);
  EXPECT_GT(mine->fencing_token(), child.token());
  AcquireOptions other;
  other.owner = "other";
  EXPECT_FALSE(p->try_lock("r", Wait::try_once(), other));
}

TEST_F(FileProcess, KilledHolderFreesTheLockAndFencingMovesOn) {
  auto p = dlock::open(dir_.uri());
  ChildHolder child(dir_.uri(), "k", "exclusive");
  ASSERT_FALSE(p->try_lock("k"));
  child.kill();
  auto start = Clock::now();
  auto lease = p->try_lock("k", Wait::for_duration(p->capabilities().crash_release_bound));
  ASSERT_TRUE(lease);
  EXPECT_LT(ms_since(start), 100ms);  // the kernel freed it at death
  EXPECT_GT(lease->fencing_token(), child.token());
}

TEST_F(FileProcess, WaiterIsWokenWhenTheHolderIsKilled) {
  // A long poll, so only the kernel's hand-over at the holder's death can explain a quick wake.
  auto p = dlock::open(dir_.uri("poll=5s"));
  ChildHolder child(dir_.uri(), "k2", "exclusive");
  std::optional<Lease> lease;
  Clock::time_point killed;
  std::jthread waiter([&] { lease = p->try_lock("k2", Wait::for_duration(20s)); });
  ASSERT_TRUE(eventually([&] { return range_state(dir_.path(), "k2", Range::gate) == F_WRLCK; }));
  killed = Clock::now();
  child.kill();
  waiter.join();
  auto latency = ms_since(killed);
  ASSERT_TRUE(lease);
  EXPECT_GT(lease->fencing_token(), child.token());
  EXPECT_LT(latency, 1s);
  std::printf("[ measure ] wake after SIGKILL of the holder: %lld ms\n",
              static_cast<long long>(latency.count()));
}

// A lock freed without any close or other file event (a holder that unlocks and keeps its
// descriptor, as dlock's release does): the waiter, blocked in the kernel, gets it at once.
TEST_F(FileProcess, ASilentUnlockHandsTheLockToTheWaiter) {
  auto p = dlock::open(dir_.uri("poll=5s"));
  std::string path = dir_.path() + "/" + lock_file_name("silent");
  UniqueFd holder(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(holder.valid());
  ASSERT_TRUE(try_lock_range(holder.get(), Range::main, RangeMode::exclusive, path.c_str()));
  std::optional<Lease> lease;
  std::jthread waiter([&] { lease = p->try_lock("silent", Wait::for_duration(20s)); });
  ASSERT_TRUE(eventually([&] { return range_state(dir_.path(), "silent", Range::gate) == F_WRLCK; }));
  std::this_thread::sleep_for(50ms);  // the waiter sleeps on its 5 s poll
  auto start = Clock::now();
  unlock_range(holder.get(), Range::main);  // freed, silently
  waiter.join();
  ASSERT_TRUE(lease);
  EXPECT_LT(ms_since(start), 1s);
  std::printf("[ measure ] waiter got a silently unlocked lock after %lld ms (poll 5 s)\n",
              static_cast<long long>(ms_since(start).count()));
}

TEST_F(FileProcess, PushWakeupBeatsTheFallbackPoll) {
  auto p = dlock::open(dir_.uri("poll=5s"));
  auto holder = dlock::open(dir_.uri());
  for (LockMode mode : {LockMode::exclusive, LockMode::shared}) {
    auto held = holder->try_lock("wake");
    ASSERT_TRUE(held);
    std::optional<Lease> lease;
    Clock::time_point woken;
    std::jthread waiter([&] {
      lease = p->try_acquire("wake", mode, Wait::for_duration(20s));
      woken = Clock::now();
    });
    std::this_thread::sleep_for(200ms);  // the waiter registered and sleeps on its 5 s poll
    auto released = Clock::now();
    held->release();
    waiter.join();
    ASSERT_TRUE(lease);
    auto latency = std::chrono::duration_cast<std::chrono::microseconds>(woken - released);
    EXPECT_LT(latency, 250ms);
    std::printf("[ measure ] %s waiter woken %lld us after release (poll 5 s)\n",
                mode == LockMode::shared ? "shared" : "exclusive",
                static_cast<long long>(latency.count()));
  }
}

// A writer that waits for a lock readers hold takes the gate (writer preference) and keeps
// it until it gets the lock. Stopped there (SIGSTOP, a debugger, a frozen cgroup), it still
// keeps it once the readers are gone. Writers must not find that free lock busy: a try-once
// takes it at once, a waiting writer within its poll. Readers stay out, as they do for any
// waiting writer (none can tell it is stopped), until it runs again and takes its turn.
TEST_F(FileProcess, AStoppedWaitingWriterKeepsOutOnlyReaders) {
  auto p = dlock::open(dir_.uri("poll=20ms"));
  auto reader = p->try_lock_shared("s");
  ASSERT_TRUE(reader);
  ChildHolder waiter(dir_.uri(), "s", "exclusive", ChildHolder::Start::waiting);
  ASSERT_TRUE(eventually([&] { return range_state(dir_.path(), "s", Range::gate) == F_WRLCK; }));
  waiter.stop();
  reader->release();
  EXPECT_EQ(range_state(dir_.path(), "s", Range::main), F_UNLCK);  // nobody holds it

  auto once = p->try_lock("s");
  EXPECT_TRUE(once) << "a try-once writer found the free lock busy";
  if (once) once->release();
  auto start = Clock::now();
  auto waited = p->try_lock("s", Wait::for_duration(1s));
  EXPECT_TRUE(waited) << "a waiting writer found the free lock busy for "
                      << ms_since(start).count() << " ms";
  EXPECT_LT(ms_since(start), 500ms);
  if (waited) waited->release();

  EXPECT_FALSE(p->try_lock_shared("s"));
  EXPECT_FALSE(p->try_lock_shared("s", Wait::for_duration(50ms)));
  waiter.resume();
  waiter.read_token();  // the waiting writer got its turn
  EXPECT_FALSE(p->try_lock_shared("s"));
  waiter.kill();
  EXPECT_TRUE(p->try_lock_shared("s"));
}

TEST_F(FileProcess, DeletingTheLockFileFiresTheLostSignal) {
  auto p = dlock::open(dir_.uri());
  auto other = dlock::open(dir_.uri());
  auto lease = p->try_lock("del");
  ASSERT_TRUE(lease);
  std::atomic<bool> called{false};  // set on dlock's thread
  lease->on_lost([&] { called = true; });
  std::string path = dir_.path() + "/" + lock_file_name("del");
  auto deleted = Clock::now();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto bound = p->capabilities().lost_signal_bound;
  ASSERT_TRUE(eventually([&] { return lease->lost_token().stop_requested(); }, bound + 1s));
  std::printf("[ measure ] lost signal %lld ms after the lock file was deleted (bound %lld ms)\n",
              static_cast<long long>(ms_since(deleted).count()),
              static_cast<long long>(bound.count()));
  EXPECT_TRUE(eventually([&] { return called.load(); }, 1s));
  EXPECT_FALSE(lease->held());
  // Someone else takes the name afresh; the old hold's release must not touch it.
  auto next = other->try_lock("del");
  ASSERT_TRUE(next);
  EXPECT_GT(next->fencing_token(), lease->fencing_token());  // the wall-clock floor
  EXPECT_FALSE(lease->release());
  EXPECT_TRUE(next->held());
  EXPECT_FALSE(p->try_lock("del"));
}

TEST_F(FileProcess, ReplacedLockFileIsNotHeldOnRelease) {
  auto p = dlock::open(dir_.uri());
  AcquireOptions explicit_lease;
  explicit_lease.lease = 1h;  // no watchdog: only release() can notice the replacement
  auto lease = p->try_lock("rep", Wait::try_once(), explicit_lease);
  ASSERT_TRUE(lease);
  std::string path = dir_.path() + "/" + lock_file_name("rep");
  ASSERT_EQ(::rename(path.c_str(), (path + ".old").c_str()), 0);
  auto other = dlock::open(dir_.uri());
  auto next = other->try_lock("rep");
  ASSERT_TRUE(next);
  EXPECT_FALSE(lease->release());  // owner-checked: reports not held
  EXPECT_TRUE(next->held());
  EXPECT_FALSE(p->try_lock("rep"));
}

}  // namespace
}  // namespace dlock::file
