// A process out of threads (RLIMIT_NPROC, a cgroup's pids.max): opening a provider, which
// starts its watchdog's two threads, fails with dlock::Error(unavailable), as every dlock
// failure does: no std::system_error, and never an abort when only the second thread fails.
#include <gtest/gtest.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "dlock/dlock.h"

namespace dlock {
namespace {

constexpr int kNotRoot = 77;

// Runs `child` in a forked child, as a user id nobody else uses that may run `tasks` tasks
// (the child's own thread included); returns its exit code, -1 if it crashed or hung.
template <class F>
int with_task_limit(rlim_t tasks, F child) {
  const auto uid = static_cast<uid_t>(1'900'000'000 + ::getpid() % 100'000);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    const rlimit limit{tasks, tasks};
    // Root ignores the limit: the child becomes an unprivileged user first.
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setrlimit(RLIMIT_NPROC, &limit) != 0 ||
        ::setuid(uid) != 0) {
      ::_exit(kNotRoot);
    }
    ::_exit(child());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int open_mem_provider() {
  try {
    auto p = open("mem://thread-limit");
    return 1;  // opened: the limit did not bite
  } catch (const Error& e) {
    return e.code() == ErrorCode::unavailable ? 0 : 2;
  } catch (...) {
    return 3;
  }
}

TEST(ThreadLimit, NoThreadAtAllIsUnavailable) {
  int code = with_task_limit(1, open_mem_provider);
  if (code == kNotRoot) GTEST_SKIP() << "needs root to run a child under its own RLIMIT_NPROC";
  EXPECT_NE(code, 1) << "the provider opened: the limit did not stop its threads";
  EXPECT_NE(code, 2) << "dlock::Error with another code than unavailable";
  EXPECT_NE(code, 3) << "an exception that is not dlock::Error (std::system_error)";
  EXPECT_EQ(code, 0) << "the child crashed or hung";
}

TEST(ThreadLimit, SecondThreadFailingIsUnavailable) {
  int code = with_task_limit(2, open_mem_provider);  // the timekeeper starts, the worker not
  if (code == kNotRoot) GTEST_SKIP() << "needs root to run a child under its own RLIMIT_NPROC";
  EXPECT_NE(code, 1) << "the provider opened: the limit did not stop its threads";
  EXPECT_NE(code, 2) << "dlock::Error with another code than unavailable";
  EXPECT_NE(code, 3) << "an exception that is not dlock::Error (std::system_error)";
  EXPECT_EQ(code, 0) << "the child crashed (std::terminate: a started thread left joinable) or hung";
}

}  // namespace
}  // namespace dlock
