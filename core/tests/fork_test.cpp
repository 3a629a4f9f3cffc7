// A process that forks after opening a provider (a daemon spawning workers): the child is
// another process, so it must never share its parent's holds, neither through the core's
// re-entry (same thread-local owner in the copy) nor through the owner keys it sends the
// server (same provider id and sequence numbers in the copy). Each child runs under an
// alarm, so a hang fails the case instead of blocking it.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "dlock/dlock.h"
#include "dlock/spi/backend_provider.h"
#include "scripted_backend.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using testing::ScriptedBackend;

// Runs `child` in a forked child; returns its exit code (-1 if it hung or crashed).
template <class F>
int in_child(F child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    ::_exit(child());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Fork, ChildDoesNotReenterItsParentsHold) {
  auto p = open("mem://fork-reenter");
  auto lease = p->try_lock("x");
  ASSERT_TRUE(lease);
  int code = in_child([&] {
    // Same thread-local owner as the parent's holder, but another process. (mem:// refuses
    // a child outright, see below; a backend that serves children answers busy.)
    try {
      if (p->try_lock("x", Wait::try_once())) return 1;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::unsupported) return 6;
    }
    if (lease->held()) return 2;
    if (lease->release()) return 3;
    try {
      lease->extend(1s);
      return 4;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::not_held) return 5;
    }
    return 0;
  });
  EXPECT_NE(code, 1) << "the child re-entered the lock its parent holds (two holders)";
  EXPECT_NE(code, 2) << "the child's copy of the parent's lease says held";
  EXPECT_NE(code, 3) << "the child released its parent's lock";
  EXPECT_NE(code, 4) << "the child extended its parent's lock";
  EXPECT_NE(code, 5) << "extend in the child threw another code than not_held";
  EXPECT_NE(code, 6) << "try_lock in the child threw another code than unsupported";
  EXPECT_EQ(code, 0) << "child hung or crashed";
  EXPECT_TRUE(lease->held());
  EXPECT_TRUE(lease->release());
}

// A provider whose connections and watchdog stay with the parent (every backend but
// file://) cannot serve a child: its sockets would carry both processes' requests, and a
// lease taken in the child would never be renewed nor its loss signalled. The child is
// told so, rather than granted.
TEST(Fork, AProviderThatCannotServeAChildRefusesItWithUnsupported) {
  auto p = open("mem://fork-refuse");
  ASSERT_FALSE(p->capabilities().serves_forked_children);
  int code = in_child([&] {
    try {
      (void)p->try_lock("y", Wait::try_once());
      return 1;
    } catch (const Error& e) {
      return e.code() == ErrorCode::unsupported && std::string(e.what()).find("fork") != std::string::npos ? 0 : 2;
    }
  });
  EXPECT_NE(code, 1) << "the child was served by its parent's provider";
  EXPECT_NE(code, 2) << "another error than unsupported naming fork()";
  EXPECT_EQ(code, 0) << "child hung or crashed";
  EXPECT_TRUE(p->try_lock("y", Wait::try_once())) << "the parent's provider still serves the parent";
}

TEST(Fork, ChildNeverSendsItsParentsOwnerKeys) {
  auto b = std::make_shared<ScriptedBackend>(30s, Liveness::lease);
  b->serve_forked_children();  // like file://
  auto p = spi::make_provider(b, "scripted://");
  // Let the provider's threads start and go idle first: one that held a mutex at the fork
  // would leave it locked in the child.
  std::this_thread::sleep_for(50ms);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  int code = in_child([&] {
    // The copy of the provider continues the parent's sequence: the next acquire of each
    // process would send the same owner key, which a server takes for one owner.
    auto l = p->try_lock("child");
    if (!l) return 1;
    std::string key;
    {
      std::lock_guard guard(b->mu);
      key = b->owner_keys.back();
    }
    if (::write(fds[1], key.data(), key.size()) != static_cast<ssize_t>(key.size())) return 2;
    return 0;
  });
  ::close(fds[1]);
  ASSERT_EQ(code, 0);
  char buf[512];
  ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  const std::string child_key(buf, static_cast<std::size_t>(n));

  auto l = p->try_lock("parent");
  ASSERT_TRUE(l);
  std::string parent_key;
  {
    std::lock_guard guard(b->mu);
    parent_key = b->owner_keys.back();
  }
  EXPECT_NE(child_key, parent_key) << "parent and child sent the same owner key";
}

}  // namespace
}  // namespace dlock
