// spi::ForkGuard: only a forked child sees the fork, however many forks came before.
#include "dlock/spi/fork_guard.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dlock::spi {
namespace {

TEST(ForkGuard, OnlyTheChildSeesTheFork) {
  ForkGuard guard;
  EXPECT_FALSE(guard.in_forked_child());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(guard.in_forked_child() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child did not see the fork";
  EXPECT_FALSE(guard.in_forked_child());
}

// A guard made in a child belongs to that child: only the grandchild sees a fork.
TEST(ForkGuard, AGuardMadeInAChildSeesOnlyLaterForks) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ForkGuard mine;
    if (mine.in_forked_child()) ::_exit(2);
    pid_t grandchild = ::fork();
    if (grandchild < 0) ::_exit(3);
    if (grandchild == 0) ::_exit(mine.in_forked_child() ? 0 : 1);
    int status = 0;
    if (::waitpid(grandchild, &status, 0) != grandchild) ::_exit(4);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the grandchild missed the fork; 2: the child's own guard saw one";
}

}  // namespace
}  // namespace dlock::spi
