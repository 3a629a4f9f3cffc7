// Dropping a provider ends its machinery (watchdog threads, backend) whichever thread ends
// up holding its last reference: here, the watchdog's own timekeeper.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "dlock/spi/backend_provider.h"
#include "eventually.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::eventually;

int thread_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (auto* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

void spin_until(const std::atomic<bool>& flag) {
  while (!flag.load()) {
  }
}

// Runs the calling thread (and the threads it starts) on one CPU while it lives, if the
// process may use two or more; restores the process's CPUs when it dies.
class Pinning {
 public:
  Pinning() {
    CPU_ZERO(&all_);
    if (::sched_getaffinity(0, sizeof all_, &all_) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &all_)) cpus_.push_back(c);
    }
  }
  ~Pinning() { ::sched_setaffinity(0, sizeof all_, &all_); }
  Pinning(const Pinning&) = delete;
  Pinning& operator=(const Pinning&) = delete;
  void pin(std::size_t which) {
    if (cpus_.size() < 2) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus_[which % cpus_.size()], &one);
    ::sched_setaffinity(0, sizeof one, &one);
  }

 private:
  cpu_set_t all_;
  std::vector<int> cpus_;
};

// Grants every name at once; renewals succeed. A lease backend of `lease`.
class GrantAll final : public spi::Backend {
 public:
  explicit GrantAll(milliseconds lease) {
    caps_.default_lease = lease;
    caps_.liveness = Liveness::lease;
  }
  const Capabilities& capabilities() const noexcept override { return caps_; }
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& r,
                                                  std::function<void()>) override {
    class Acquisition final : public spi::Acquisition {
     public:
      explicit Acquisition(const spi::AttemptRequest& r) : r_(r) {}
      spi::Attempt attempt() override {
        return std::make_shared<spi::HeldLock>(std::string(r_.name), r_.mode, std::string(r_.owner_key), 1,
                                               Clock::now() + r_.lease);
      }
      milliseconds fallback_poll() const noexcept override { return milliseconds(5); }

     private:
      const spi::AttemptRequest& r_;
    };
    return std::make_unique<Acquisition>(r);
  }
  bool release(spi::HeldLock&) override { return true; }
  void extend_many(std::span<spi::HeldLock* const> locks, milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override {
    for (std::size_t i = 0; i < locks.size(); ++i) {
      locks[i]->set_server_expiry(Clock::now() + lease);
      out[i] = spi::RenewStatus::renewed;
    }
  }

 private:
  Capabilities caps_;
};

// The watchdog's timekeeper co-owns every hold it plans for a while. When the holder drops
// the last Lease and the provider meanwhile, the timekeeper's reference is the provider's
// last: it must die outside the watchdog's mutex (the provider's destructor takes it), else
// the timekeeper deadlocks on itself, and its two threads and the backend leak.
//
// The plan is entered at a known moment and made long. Hold "t" is renewed (lease 1.2 s:
// renewal due at 400 ms, and a plan from 300 ms on keeps it as a pending renewal until the
// plan ends). Hold "y" gives up at 320 ms (max_hold): its lost signal runs on the
// timekeeper, outside the mutex, right before the timekeeper plans again. While it waits
// there, 20000 other holds are dropped: the next plan takes "t", then sweeps their 20000
// entries (a millisecond or so), and "t" and the provider are dropped during that sweep.
// The provider's threads run on one CPU and the test on another, so that neither delays
// the other; what other processes do can still spoil a round, hence up to three rounds.
void drop_provider_while_the_watchdog_plans(Pinning& pinning) {
  auto backend = std::make_shared<GrantAll>(1200ms);
  std::weak_ptr<GrantAll> backend_alive = backend;
  pinning.pin(1);
  auto provider = spi::make_provider(std::move(backend), "grant-all://");  // threads on CPU 1
  pinning.pin(0);

  std::vector<Lease> others;  // no renewal and no deadline for an hour: they wake nobody
  for (int i = 0; i < 20000; ++i) {
    others.push_back(*provider->try_lock("o" + std::to_string(i), Wait::try_once(), {.lease = 1h}));
  }
  std::optional<Lease> t = provider->try_lock("t");
  ASSERT_TRUE(t);
  std::optional<Lease> y = provider->try_lock("y", Wait::try_once(), {.lease = 1h, .max_hold = 320ms});
  ASSERT_TRUE(y);

  const auto test_thread = std::this_thread::get_id();
  std::atomic<bool> in_signal{false}, go{false}, resumed{false}, late{false};
  std::stop_callback on_lost(y->lost_token(), [&] {
    if (std::this_thread::get_id() == test_thread) {  // fired before we got here
      late = true;
      return;
    }
    in_signal = true;
    spin_until(go);
    resumed = true;
  });
  if (late) {  // a stall of 320 ms since y was taken: this round proves nothing
    std::fprintf(stderr, "round skipped: y gave up before its signal was watched\n");
    return;
  }
  ASSERT_TRUE(eventually([&] { return in_signal.load(); }, 2s)) << "max_hold did not fire on the timekeeper";
  others.clear();  // dead entries: the next plan sweeps them
  y.reset();
  go = true;
  spin_until(resumed);  // the timekeeper plans again now, taking "t" first
  const auto until = Clock::now() + 50us;
  while (Clock::now() < until) {
  }
  t.reset();
  provider.reset();

  ASSERT_TRUE(eventually([&] { return backend_alive.expired(); }, 2s))
      << "the provider's watchdog and backend outlived its last reference (the timekeeper deadlocked on itself)";
}

TEST(ProviderDrop, LastReferenceHeldByThePlanningWatchdogEndsTheProvider) {
  const int threads_before = thread_count();
  {
    Pinning pinning;
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      drop_provider_while_the_watchdog_plans(pinning);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_TRUE(eventually([&] { return thread_count() <= threads_before; }, 2s))
      << "threads before: " << threads_before << ", after: " << thread_count();
}

}  // namespace
}  // namespace dlock
