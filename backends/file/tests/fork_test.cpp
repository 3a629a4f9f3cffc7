// A process that forks after opening file:// (a daemon spawning workers): the child must not
// free the parent's locks nor stop the parent's watcher thread. Each child runs under an
// alarm, so a hang fails the case instead of blocking it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "dir_watcher.h"
#include "dlock/dlock.h"
#include "temp_dir.h"
#include "test_util.h"

namespace dlock::file {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::range_state;

// Runs `child` in a forked child that exits 0 if it returns true; returns the wait status.
template <class F>
int in_child(F child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    ::_exit(child() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(FileFork, ChildDroppingTheWatcherLeavesTheParentsRunning) {
  testing::TempDir dir;
  auto watcher = DirWatcher::for_directory(dir.path());
  ASSERT_TRUE(watcher->healthy());
  int status = in_child([&] {
    watcher.reset();  // the last reference in the child: its destructor runs there
    return true;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "child hung or crashed, status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);

  std::atomic<int> wakes{0};
  auto registration = watcher->watch("n-x.lock", [&] { ++wakes; });
  std::string path = dir.path() + "/n-x.lock";
  UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));  // IN_CLOSE_WRITE
  EXPECT_TRUE(eventually([&] { return wakes > 0; }, 2s));
}

TEST(FileFork, ChildReleasingAnInheritedLeaseLeavesTheParentsLock) {
  testing::TempDir dir;
  auto p = dlock::open(dir.uri());
  auto lease = p->try_lock("f");
  ASSERT_TRUE(lease);
  int status = in_child([&] { return !lease->release(); });  // "not held" in the child
  ASSERT_TRUE(WIFEXITED(status)) << "child hung or crashed, status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);

  EXPECT_EQ(range_state(dir.path(), "f", Range::main), F_WRLCK);
  EXPECT_FALSE(dlock::open(dir.uri())->try_lock("f"));
  EXPECT_TRUE(lease->held());
  EXPECT_TRUE(lease->release());
}

}  // namespace
}  // namespace dlock::file
