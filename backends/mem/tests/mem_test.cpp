// mem:// as a backend: its URI, its spaces, its saboteur, and what a given-up waiter leaves.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <mutex>
#include <thread>

#include "dlock/backends/mem.h"
#include "dlock/dlock.h"
#include "mem_backend.h"
#include "mem_space.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

TEST(MemUri, RejectsWhatItDoesNotTake) {
  for (const char* uri : {"mem://u:secret@space", "mem://space:12", "mem://space/path",
                          "mem://space?lease=fast", "mem://space?color=red"}) {
    try {
      (void)dlock::open(uri);
      ADD_FAILURE() << uri << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << uri;
      EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(dlock::open("mem://s?lease=2s")->capabilities().default_lease, 2s);
}

// An unknown parameter may be a password under another name (pw=): named, never shown,
// also when another parameter is the one at fault.
TEST(MemUri, AnUnknownParametersValueIsNeverShown) {
  for (const char* uri : {"mem://space?pw=hunter2", "mem://space?pw=hunter2&lease=fast", "mem://space/path?pw=hunter2"}) {
    try {
      (void)dlock::open(uri);
      ADD_FAILURE() << uri << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << uri;
      EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
    }
  }
}

TEST(MemSpaces, SameSpaceExcludesOtherSpacesDoNot) {
  auto a = dlock::open("mem://mem-test-space-1");
  auto b = dlock::open("mem://mem-test-space-1");
  auto c = dlock::open("mem://mem-test-space-2");
  auto held = a->try_lock("n");
  ASSERT_TRUE(held);
  EXPECT_FALSE(b->try_lock("n")) << "two providers of one space both got the lock";
  EXPECT_TRUE(c->try_lock("n")) << "spaces are not independent";
}

TEST(MemSaboteur, BreakLockFiresTheLostSignalAtTheNextRenewal) {
  auto p = dlock::open("mem://mem-test-break?lease=300ms");
  auto l = p->try_lock("n");
  ASSERT_TRUE(l);
  mem::break_lock("mem-test-break", "n");
  auto until = std::chrono::steady_clock::now() + 2s;
  while (!l->lost_token().stop_requested() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(l->lost_token().stop_requested());
  EXPECT_FALSE(l->release());
  EXPECT_TRUE(p->try_lock("n"));
}

// A writer that waited and gave up must not keep new readers out (writer preference ends
// with the writer's acquire).
TEST(MemWaiters, WriterThatGaveUpLeavesNoPreferenceBehind) {
  auto p = dlock::open("mem://mem-test-writer");
  auto reader = p->try_lock_shared("n");
  ASSERT_TRUE(reader);
  std::thread writer([&] { EXPECT_FALSE(p->try_lock("n", Wait::for_duration(100ms), {.owner = std::string("w")})); });
  writer.join();
  EXPECT_TRUE(p->try_lock_shared("n", Wait::try_once(), {.owner = std::string("r2")}));
}

// A fair waiter that gave up leaves the queue at once: the next one is served.
TEST(MemWaiters, FairWaiterThatGaveUpLeavesTheQueue) {
  auto p = dlock::open("mem://mem-test-fair");
  auto holder = p->try_lock("n", Wait::try_once(), {.fair = true});
  ASSERT_TRUE(holder);
  std::thread first([&] {
    EXPECT_FALSE(p->try_lock("n", Wait::for_duration(50ms), {.owner = std::string("a"), .fair = true}));
  });
  first.join();
  std::optional<Lease> got;
  std::thread second([&] { got = p->try_lock("n", Wait::for_duration(2s), {.owner = std::string("b"), .fair = true}); });
  std::this_thread::sleep_for(50ms);
  auto released = std::chrono::steady_clock::now();
  holder->release();
  second.join();
  ASSERT_TRUE(got);
  EXPECT_LT(std::chrono::steady_clock::now() - released, 500ms) << "a gone waiter held up the queue";
}

// A waiter that waited and was granted unregisters its wake-up too: they piled up, one per
// contended acquire, and every later release called them all.
TEST(MemWaiters, AGrantedWaiterLeavesNoWakeUpBehind) {
  auto p = dlock::open("mem://mem-test-wakers");
  auto wakers = [] {
    auto s = mem::space("mem-test-wakers");
    std::lock_guard lock(s->mu);
    return s->entries["hot"].wakers.size();
  };
  for (int i = 0; i < 20; ++i) {
    auto held = p->lock("hot");
    const auto before = wakers();
    std::thread waiter([&] { EXPECT_TRUE(p->try_lock("hot", Wait::for_duration(5s), {.owner = std::string("w")})); });
    while (wakers() == before) std::this_thread::yield();  // until the waiter waits
    held.release();
    waiter.join();
  }
  EXPECT_EQ(wakers(), 0u);
}

// An expired holder is told (its lost signal fired) before its name is granted again, however
// late its own watchdog: here it has none at all (the backend used without the core, as a
// holder whose timer never fires). Both an expired writer and an expired reader.
TEST(MemLeases, AnExpiredHolderIsToldBeforeTheNameIsGrantedAgain) {
  mem::MemBackend backend(mem::space("mem-test-expired"), 30s);
  auto take = [&](std::string_view owner, LockMode mode) -> std::shared_ptr<spi::HeldLock> {
    spi::AttemptRequest r;
    r.name = "n";
    r.mode = mode;
    r.owner_key = owner;
    r.waiter_id = owner;
    r.lease = 20ms;
    auto acquisition = backend.begin_acquire(r, [] {});
    auto got = acquisition->attempt();
    auto* held = std::get_if<std::shared_ptr<spi::HeldLock>>(&got);
    return held ? *held : nullptr;
  };
  for (LockMode first_mode : {LockMode::exclusive, LockMode::shared}) {
    SCOPED_TRACE(first_mode == LockMode::exclusive ? "expired writer" : "expired reader");
    auto first = take(first_mode == LockMode::exclusive ? "w1" : "r1", first_mode);
    ASSERT_TRUE(first);
    std::this_thread::sleep_until(first->server_expiry() + 1ms);
    auto second = take("w2", LockMode::exclusive);
    const bool told_at_grant = first->lost();
    ASSERT_TRUE(second) << "an expired hold still kept the name";
    EXPECT_TRUE(told_at_grant) << "the name was granted again before its expired holder was told";
    EXPECT_FALSE(backend.release(*first));
    EXPECT_TRUE(backend.release(*second));
  }
}

// Runs `child` in a forked child (killed by SIGALRM if it hangs for 3 s); returns its status.
template <class F>
int in_child(F child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(3);
    int code = 3;
    try {
      code = child() ? 0 : 1;
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// The parent's leases are never the child's: after fork() the child's own provider of the
// same space finds the names its parent holds free (nobody in the child holds them).
TEST(MemFork, TheChildsOwnProviderFindsNoneOfItsParentsLocks) {
  auto p = dlock::open("mem://mem-test-fork");
  auto held = p->try_lock("x");
  ASSERT_TRUE(held);
  int status = in_child([] { return dlock::open("mem://mem-test-fork")->try_lock("x").has_value(); });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child found its parent's lock held (exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
      << ", signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
  EXPECT_TRUE(held->held()) << "the child's fork took the parent's lease";
}

// A space whose mutex a parent thread held at the fork (an acquire in progress) must not
// hang the child: the child starts with tables of its own.
TEST(MemFork, ASpaceBusyAtTheForkDoesNotHangTheChild) {
  auto p = dlock::open("mem://mem-test-fork-busy");
  auto s = mem::space("mem-test-fork-busy");
  int status = 0;
  {
    std::lock_guard busy(s->mu);
    status = in_child([] { return dlock::open("mem://mem-test-fork-busy")->try_lock("x").has_value(); });
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's acquire " << (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? "hung" : "failed");
  EXPECT_TRUE(p->try_lock("x")) << "the parent's space was disturbed";
}

// A name leaves nothing behind once nobody holds or awaits it (the table grew by an entry per
// name ever tried), and tokens still increase across its successive holders.
TEST(MemTable, ANameNobodyHoldsOrAwaitsLeavesNoEntry) {
  auto p = dlock::open("mem://mem-test-table");
  auto q = dlock::open("mem://mem-test-table");
  auto entries = [] {
    auto s = mem::space("mem-test-table");
    std::lock_guard lock(s->mu);
    return s->entries.size();
  };
  for (int i = 0; i < 500; ++i) {
    const std::string n = "name-" + std::to_string(i);
    auto held = p->try_lock(n);
    ASSERT_TRUE(held);
    EXPECT_FALSE(q->try_lock_shared(n));                        // a busy try-once
    EXPECT_FALSE(q->try_lock(n, Wait::for_duration(1ms)));      // a waiter that gave up
    held->release();
    auto again = q->try_lock_shared(n, Wait::try_once(), {.fair = true});
    ASSERT_TRUE(again);
    EXPECT_GT(again->fencing_token(), held->fencing_token()) << n;
  }
  EXPECT_EQ(entries(), 0u) << "released names stay in the table";
  EXPECT_TRUE(mem::residue("mem-test-table").empty());
}

}  // namespace
}  // namespace dlock
