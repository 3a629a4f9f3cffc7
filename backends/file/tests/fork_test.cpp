// A process that forks after opening file:// (a daemon spawning workers): the child must not
// free the parent's locks nor share them through an inherited descriptor. Each child runs
// under an alarm, so a hang fails the case instead of blocking it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>

#include "dlock/dlock.h"
#include "temp_dir.h"
#include "test_util.h"

namespace dlock::file {
namespace {

using namespace std::chrono_literals;
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

TEST(FileFork, ChildNeverReusesTheParentsKeptDescriptors) {
  testing::TempDir dir;
  auto p = dlock::open(dir.uri());
  auto first = p->try_lock("kept");
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->release());  // its descriptor is now kept open for the next hold
  // The parent takes the name again (on the kept description); a child that took the kept
  // description too would share the parent's hold and be granted alongside it.
  auto again = p->try_lock("kept");
  ASSERT_TRUE(again);
  // Another owner in the child, so the core sees no re-entry and asks the backend.
  AcquireOptions other_owner;
  other_owner.owner = "child";
  auto child_try = [&] { return !p->try_lock("kept", Wait::try_once(), other_owner); };
  int status = in_child(child_try);
  ASSERT_TRUE(WIFEXITED(status)) << "child hung or crashed, status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child was granted a lock its parent holds";
  ASSERT_TRUE(again->release());
  // And after the parent released it: the child's kept copy must not be granted while the
  // parent holds the name through a fresh description.
  auto third = p->try_lock("kept");
  ASSERT_TRUE(third);
  status = in_child(child_try);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
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
