// A process that forks after opening file:// (a daemon spawning workers): the child must not
// free the parent's locks nor share them through an inherited descriptor. Each child runs
// under an alarm, so a hang fails the case instead of blocking it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

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

// A waiter that gives up must unlock what it took rather than count on closing its
// descriptor: a child forked while it waited (a pre-forked worker that never execs) shares
// the open file description, and closing only the parent's copy would leave the writer's
// gate (and the queue byte) locked for as long as the child lives, with nobody holding the
// lock.
TEST(FileFork, AWriterThatGivesUpLeavesNothingInAForkedChild) {
  testing::TempDir dir;
  auto a = dlock::open(dir.uri()), b = dlock::open(dir.uri()), c = dlock::open(dir.uri());
  auto reader = a->try_lock_shared("g");
  ASSERT_TRUE(reader);
  std::optional<Lease> w;
  std::jthread writer([&](std::stop_token stop) {
    AcquireOptions opts;
    opts.cancel = stop;
    w = b->try_lock("g", Wait::forever(), opts);
  });
  // Waiting: it holds the gate (writer preference) and blocks on main.
  ASSERT_TRUE(eventually([&] { return range_state(dir.path(), "g", Range::gate) == F_WRLCK; }));
  int gone[2];  // the child lives until the parent closes its end
  ASSERT_EQ(::pipe2(gone, O_CLOEXEC), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::alarm(10);
    ::close(gone[1]);
    char byte;
    (void)::read(gone[0], &byte, 1);
    ::_exit(0);
  }
  ::close(gone[0]);
  writer.request_stop();
  writer.join();
  EXPECT_FALSE(w);
  reader->release();

  // Nobody holds "g" now, while the child still lives.
  EXPECT_EQ(range_state(dir.path(), "g", Range::gate), F_UNLCK);
  EXPECT_EQ(range_state(dir.path(), "g", Range::queue), F_UNLCK);
  EXPECT_TRUE(c->try_lock_shared("g"));
  EXPECT_TRUE(c->try_lock("g"));
  EXPECT_EQ(::waitpid(child, nullptr, WNOHANG), 0);  // the child was alive all along

  ::close(gone[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// The parent's provider is not the child's, even on file://: a parent thread may hold one
// of its mutexes at the fork (the child then hung in try_lock for good), and the child has
// none of its watchdog threads (a lease or max_hold taken there was never enforced). The
// child is told to open its own, which serves it.
TEST(FileFork, AChildIsToldToOpenItsOwnProviderAndNeverHangs) {
  testing::TempDir dir;
  auto p = dlock::open(dir.uri());
  std::atomic<bool> stop{false};
  std::thread busy([&] {  // a parent thread always inside the provider
    auto outer = p->lock("busy");
    while (!stop) (void)p->try_lock("busy");
  });
  int refused = 0, other = 0;
  for (int i = 0; i < 200; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::alarm(3);
      try {
        (void)p->try_lock("child");
        ::_exit(1);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::unsupported) ::_exit(2);
      }
      auto own = dlock::open(dir.uri());
      auto l = own->try_lock("child", Wait::try_once(), {.lease = 200ms});
      ::_exit(l ? 0 : 3);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++refused;
    } else {
      ++other;
      ADD_FAILURE() << "child " << i << ": "
                    << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                            : "exit " + std::to_string(WEXITSTATUS(status)))
                    << " (1: served by the parent's provider, 2: another error, 3: its own provider "
                       "refused, 14: hung)";
      if (other >= 3) break;
    }
  }
  stop = true;
  busy.join();
  EXPECT_EQ(refused, 200);
}

}  // namespace
}  // namespace dlock::file
