// Descriptors kept open between holds (fd_pool.h) and waiters blocked in the kernel
// (kernel_wait.h): neither may ever let two holds share a lock, nor wait on a file that was
// replaced.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "dlock/dlock.h"
#include "range_lock.h"
#include "temp_dir.h"
#include "test_util.h"

namespace dlock::file {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using Clock = std::chrono::steady_clock;

class KeptDescriptors : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const {
    return dir_.path() + "/" + lock_file_name(name);
  }
  testing::TempDir dir_;
};

TEST_F(KeptDescriptors, AKeptDescriptorOfAReplacedFileIsNeverGranted) {
  auto p = dlock::open(dir_.uri());
  auto q = dlock::open(dir_.uri());
  auto first = p->try_lock("swap");
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->release());  // p keeps the descriptor of the original file
  ASSERT_EQ(::rename(path("swap").c_str(), (dir_.path() + "/orphan").c_str()), 0);
  // p locks its kept orphan, notices, and takes the file the name now has.
  auto again = p->try_lock("swap");
  ASSERT_TRUE(again);
  EXPECT_FALSE(q->try_lock("swap"));  // so the two exclude each other on that file
  ASSERT_TRUE(again->release());
}

TEST_F(KeptDescriptors, ABusyOrphanDoesNotMakeTheNameLookBusy) {
  auto p = dlock::open(dir_.uri());
  auto first = p->try_lock("swap2");
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->release());
  // Someone holds the original inode after it was replaced: p's kept descriptor finds it
  // busy, but the name's file is free.
  UniqueFd orphan(::open(path("swap2").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(orphan.valid());
  ASSERT_TRUE(try_lock_range(orphan.get(), Range::main, RangeMode::exclusive, "orphan"));
  ASSERT_EQ(::unlink(path("swap2").c_str()), 0);
  auto again = p->try_lock("swap2");
  EXPECT_TRUE(again);
}

TEST_F(KeptDescriptors, AWaiterOnAReplacedFileMovesToTheNewOne) {
  auto p = dlock::open(dir_.uri("poll=50ms"));
  UniqueFd stuck(::open(path("moved").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(stuck.valid());
  ASSERT_TRUE(try_lock_range(stuck.get(), Range::main, RangeMode::exclusive, "stuck"));
  std::optional<Lease> lease;
  std::jthread waiter([&] { lease = p->try_lock("moved", Wait::for_duration(10s)); });
  ASSERT_TRUE(eventually([&] {
    return testing::range_state(dir_.path(), "moved", Range::gate) == F_WRLCK;
  }));
  // The held file goes away for good; its holder never lets go.
  ASSERT_EQ(::unlink(path("moved").c_str()), 0);
  auto start = Clock::now();
  waiter.join();
  ASSERT_TRUE(lease);
  EXPECT_LT(Clock::now() - start, 2s);  // found at a fallback poll, not at the deadline
}

// A waiter in the queue that never gets to run (a stopped process) must not make a free
// lock look busy to a try-once, nor keep a waiting acquire from taking it.
TEST_F(KeptDescriptors, AStuckQueuedWaiterDoesNotBlockAFreeLock) {
  auto p = dlock::open(dir_.uri("poll=5s"));
  ASSERT_TRUE(p->try_lock("queued"));  // creates the file
  UniqueFd stuck(::open(path("queued").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(stuck.valid());
  ASSERT_TRUE(try_lock_range(stuck.get(), Range::queue, RangeMode::shared, "stuck"));
  auto tried = p->try_lock("queued");
  ASSERT_TRUE(tried);
  ASSERT_TRUE(tried->release());
  auto start = Clock::now();
  auto waited = p->try_lock("queued", Wait::for_duration(10s));
  ASSERT_TRUE(waited);
  EXPECT_LT(Clock::now() - start, 1s);
  auto shared = dlock::open(dir_.uri())->try_lock_shared("queued");
  EXPECT_FALSE(shared);  // and the lock it took is exclusive
}

TEST_F(KeptDescriptors, ManyWaitersGetTheLockInTurnWithoutOverlap) {
  auto p = dlock::open(dir_.uri("poll=5s"));
  std::atomic<int> inside{0}, overlaps{0}, done{0};
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      AcquireOptions opts;
      opts.owner = "worker-" + std::to_string(t);
      for (int i = 0; i < 200; ++i) {
        auto lease = p->try_lock("turns", Wait::for_duration(20s), opts);
        if (!lease) return;
        if (inside.fetch_add(1) != 0) ++overlaps;
        inside.fetch_sub(1);
        lease->release();
        ++done;
      }
    });
  }
  threads.clear();  // joins
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(done.load(), 800);  // with a 5 s poll, only kernel hand-overs keep this quick
}

}  // namespace
}  // namespace dlock::file
