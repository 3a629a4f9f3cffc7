// close_on_exec.h: a library's new descriptors are marked
// close-on-exec, and nothing else is.
#include "dlock/support/close_on_exec.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

namespace dlock::support {
namespace {

bool close_on_exec(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

bool listed(const std::vector<int>& fds, int fd) { return std::find(fds.begin(), fds.end(), fd) != fds.end(); }

TEST(CloseOnExec, NewDescriptorsAreMarkedAndEarlierOnesLeftAlone) {
  int earlier[2];
  ASSERT_EQ(::pipe(earlier), 0);
  const std::vector<int> before = inheritable_descriptors();
  EXPECT_TRUE(listed(before, earlier[0]));
  int opened[2];
  ASSERT_EQ(::pipe(opened), 0);  // what a client library opens without O_CLOEXEC
  EXPECT_TRUE(listed(inheritable_descriptors(), opened[1]));
  close_new_descriptors_on_exec(before);
  EXPECT_TRUE(close_on_exec(opened[0]));
  EXPECT_TRUE(close_on_exec(opened[1]));
  EXPECT_FALSE(close_on_exec(earlier[0])) << "a descriptor open before was the caller's, not the library's";
  EXPECT_FALSE(listed(inheritable_descriptors(), opened[0]));
  for (int fd : {earlier[0], earlier[1], opened[0], opened[1]}) ::close(fd);
}

// Started with stdin closed, a process's next descriptor is 0: one a library opens there is
// marked like any other (dlock run would otherwise hand it to CMD as its stdin).
TEST(CloseOnExec, ALibrarysDescriptorInAStdioSlotIsMarkedToo) {
  const int saved_stdin = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
  ::close(0);
  const std::vector<int> before = inheritable_descriptors();
  EXPECT_FALSE(listed(before, 0));
  int opened[2];
  ASSERT_EQ(::pipe(opened), 0);
  EXPECT_EQ(opened[0], 0);
  close_new_descriptors_on_exec(before);
  EXPECT_TRUE(close_on_exec(opened[0]));
  EXPECT_TRUE(close_on_exec(opened[1]));
  ::close(opened[1]);
  if (saved_stdin >= 0) {
    ::dup2(saved_stdin, 0);  // the copy dup2 makes is inheritable again, as stdin was
    ::close(saved_stdin);
  } else {
    ::close(0);
  }
}

TEST(CloseOnExec, OpenDescriptorsListsCloseOnExecOnesToo) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const std::vector<int> open = open_descriptors();
  EXPECT_TRUE(listed(open, fds[0]));
  EXPECT_TRUE(listed(open, fds[1]));
  EXPECT_TRUE(std::is_sorted(open.begin(), open.end()));
  EXPECT_FALSE(listed(inheritable_descriptors(), fds[0]));
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_FALSE(listed(open_descriptors(), fds[0]));
}

TEST(CloseOnExec, AClosedDescriptorIsAFalseNotACrash) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_FALSE(set_close_on_exec(fds[0]));
}

}  // namespace
}  // namespace dlock::support
