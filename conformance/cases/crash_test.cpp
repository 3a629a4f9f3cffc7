// Contract 4: a holder that dies (SIGKILL, or exit without release) never blocks others for
// longer than the backend's declared bound.
#include <signal.h>

#include <thread>

#include "framework/conformance_test.h"
#include "framework/hex.h"
#include "framework/taker_client.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Crash);

namespace {

// Records the taker's hold, ending when it died.
void record_dead_holder(SafetyChecker& c, const std::string& n, const Taker::Acquired& a, std::int64_t died) {
  HoldRecord h;
  h.name = n;
  h.owner = "taker";
  h.token = a.token;
  h.start_ns = a.start_ns;
  h.end_ns = died;
  c.record(h);
}

// A taker's helper process (not this process's child): SIGKILLed when this goes.
struct StrayProcess {
  Taker::Spawned spawned;
  ~StrayProcess() {
    if (spawned.pid > 0) ::kill(spawned.pid, SIGKILL);
  }
};

}  // namespace

TEST_P(Crash, SigkillOfTheHolderFreesTheLockWithinTheDeclaredBound) {
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  const auto n = name();
  Taker taker(env().uri());
  auto theirs = taker.acquire(n, milliseconds(0));
  ASSERT_TRUE(theirs);
  EXPECT_FALSE(p->try_lock(n).has_value());
  const auto bound = p->capabilities().crash_release_bound;
  const auto start = Clock::now();
  const auto died = taker.kill9();
  record_dead_holder(checker(), n, *theirs, died);
  auto ours = track(*p, n, Wait::for_duration(bound + tol()));
  ASSERT_TRUE(ours) << "a SIGKILLed holder kept the lock past the declared " << bound.count() << " ms";
  std::cout << "[conformance] " << ctx().backend << " lock free " << ms_since(start)
            << " ms after SIGKILL (declared bound " << bound.count() << " ms)\n";
  EXPECT_LE(ms_since(start), (bound + tol()).count());
}

TEST_P(Crash, ExitWithoutReleaseFreesTheLockWithinTheDeclaredBound) {
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  const auto n = name();
  Taker taker(env().uri());
  auto theirs = taker.acquire(n, milliseconds(0));
  ASSERT_TRUE(theirs);
  const auto bound = p->capabilities().crash_release_bound;
  const auto start = Clock::now();
  const auto died = now_ns();
  taker.abandon();
  record_dead_holder(checker(), n, *theirs, died);
  auto ours = track(*p, n, Wait::for_duration(bound + tol()));
  ASSERT_TRUE(ours) << "an abandoned lock outlived the declared " << bound.count() << " ms";
  EXPECT_LE(ms_since(start), (bound + tol()).count());
}

// A service that holds a lock and starts a helper process (system(), posix_spawn: fork +
// exec, no descriptor closed) must not hand the helper its lock: if the helper inherited the
// provider's connection (a session lock's socket, a lock file's descriptor), the lock would
// outlive the holder for as long as the helper runs.
TEST_P(Crash, SigkillOfAHolderWhoseHelperProcessLivesOnFreesTheLock) {
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  const auto n = name();
  Taker taker(env().uri());
  auto theirs = taker.acquire(n, milliseconds(0));
  ASSERT_TRUE(theirs);
  const StrayProcess helper{taker.spawn()};
  const auto bound = p->capabilities().crash_release_bound;
  const auto start = Clock::now();
  const auto died = taker.kill9();
  record_dead_holder(checker(), n, *theirs, died);
  auto ours = track(*p, n, Wait::for_duration(bound + tol()));
  ASSERT_TRUE(ours) << "the holder's helper process (pid " << helper.spawned.pid
                    << ") kept the lock past the declared " << bound.count()
                    << " ms; it inherited these descriptors: " << helper.spawned.inherited;
  EXPECT_LE(ms_since(start), (bound + tol()).count());
  std::cout << "[conformance] " << ctx().backend << " lock free " << ms_since(start)
            << " ms after SIGKILL of a holder whose helper lives on (declared bound " << bound.count() << " ms)\n";
}

// The same helper inherits nothing of the provider at all (client libraries often open
// sockets and pipes without O_CLOEXEC): it could keep a session open, or write into it.
TEST_P(Crash, AHelperProcessOfTheHolderInheritsNoneOfTheProvidersDescriptors) {
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  const auto held = name();
  const auto busy = name();
  auto ours = track(*p, busy, Wait::try_once());
  ASSERT_TRUE(ours);
  Taker taker(env().uri());
  ASSERT_TRUE(taker.acquire(held, milliseconds(0)));
  // A wait too, so that whatever a waiter opens (a waiter connection, a subscription, a
  // watch) is open when the helper starts.
  EXPECT_FALSE(taker.acquire(busy, milliseconds(200), milliseconds(0), false));
  const StrayProcess helper{taker.spawn()};
  EXPECT_EQ(helper.spawned.inherited, "-") << "descriptors of the provider a helper process inherited";
}

TEST_P(Crash, KilledWaiterDoesNotBlockTheLockForLong) {
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  auto third = open();
  const auto n = name();
  auto mine = track(*p, n, Wait::try_once());
  ASSERT_TRUE(mine);
  {
    Taker waiter(env().uri());
    // The taker blocks in a long wait (fair where claimed); it dies mid-wait.
    waiter.send("acquire " + to_hex(n) + " ex 60000 0" + (claims().fair ? " fair" : ""));
    std::this_thread::sleep_for(milliseconds(300));
    waiter.kill9();
  }
  EXPECT_TRUE(mine->release());
  AcquireOptions o;
  o.fair = claims().fair;
  const auto bound = p->capabilities().crash_release_bound;
  const auto start = Clock::now();
  auto next = track(*third, n, Wait::for_duration(bound + tol()), o);
  EXPECT_TRUE(next) << "a waiter killed mid-wait blocks the lock";
  std::cout << "[conformance] " << ctx().backend << " free " << ms_since(start)
            << " ms after a killed waiter's holder released\n";
}

}  // namespace dlock::conformance
