// dlock::Mutex / dlock::SharedMutex with the std lock types, on mem://.
#include "dlock/adapters/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/backends/mem.h"
#include "dlock/dlock.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<ILockProvider> provider(const char* space) { return open(std::string("mem://") + space); }

TEST(Mutex, ExcludesThreadsAndWorksWithStdLocks) {
  Mutex m(provider("mutex-exclusion"), "counter");
  int counter = 0;  // not atomic: only the lock protects it
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        std::lock_guard guard(m);
        if (inside.fetch_add(1) != 0) overlap = true;
        int seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, 100);
}

TEST(Mutex, TryLockFailsWhileAnotherThreadHoldsIt) {
  auto p = provider("mutex-try");
  Mutex m(p, "job");
  std::unique_lock lk(m);
  ASSERT_TRUE(lk.owns_lock());
  EXPECT_NE(m.fencing_token(), 0u);
  std::thread other([&] {
    EXPECT_FALSE(m.try_lock());
    auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(m.try_lock_for(100ms));
    auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, 90ms);
    EXPECT_LT(waited, 2s);
    EXPECT_FALSE(m.try_lock_until(std::chrono::system_clock::now() + 50ms));
    EXPECT_FALSE(m.try_lock_for(-1s));  // negative: one attempt
  });
  other.join();
  lk.unlock();
  EXPECT_EQ(m.fencing_token(), 0u);
  std::thread again([&] {
    ASSERT_TRUE(m.try_lock_for(1s));
    m.unlock();
  });
  again.join();
}

TEST(Mutex, TwoMutexObjectsOnOneNameExcludeEachOther) {
  auto p = provider("mutex-two");
  Mutex a(p, "name");
  Mutex b(p, "name");
  std::scoped_lock lk(a);
  std::thread other([&] { EXPECT_FALSE(b.try_lock()); });
  other.join();
}

TEST(Mutex, FencingTokensIncreaseAcrossHolds) {
  Mutex m(provider("mutex-fencing"), "job");
  m.lock();
  auto first = m.fencing_token();
  m.unlock();
  m.lock();
  EXPECT_GT(m.fencing_token(), first);
  m.unlock();
}

TEST(Mutex, RelockingFromTheHoldingThreadIsRefused) {
  Mutex m(provider("mutex-relock"), "job");
  std::unique_lock lk(m);
  try {
    m.lock();
    FAIL() << "expected would_deadlock";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::would_deadlock);
  }
  EXPECT_THROW((void)m.try_lock(), Error);
}

TEST(Mutex, UnlockWhenNotLockedDoesNothing) {
  Mutex m(provider("mutex-unlock"), "job");
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
  m.unlock();
}

TEST(Mutex, RejectsAnExplicitOwnerAndANullProvider) {
  AcquireOptions o;
  o.owner = "someone";
  EXPECT_THROW(Mutex(provider("mutex-args"), "job", o), Error);
  EXPECT_THROW(Mutex(nullptr, "job"), Error);
}

TEST(Mutex, LockIsCancelledThroughTheOptionsToken) {
  auto p = provider("mutex-cancel");
  Mutex holder(p, "job");
  holder.lock();
  std::stop_source stop;
  AcquireOptions o;
  o.cancel = stop.get_token();
  Mutex waiter(p, "job", o);
  std::thread t([&] {
    try {
      waiter.lock();
      ADD_FAILURE() << "lock() returned while the lock was held";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::cancelled);
    }
  });
  std::this_thread::sleep_for(50ms);
  stop.request_stop();
  t.join();
  holder.unlock();
}

TEST(Mutex, LostTokenFiresWhenMaxHoldIsReached) {
  AcquireOptions o;
  o.max_hold = 100ms;
  Mutex m(provider("mutex-lost"), "job", o);
  m.lock();
  std::stop_token lost = m.lost_token();
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (!lost.stop_requested() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(lost.stop_requested());
  m.unlock();  // never throws, even though the lock was lost
}

// True once `pred` holds, false if it did not within `limit`.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A hold of a Mutex is lost (mem::break_lock, as a server losing the key) while a second
// thread waits on the same Mutex object: the second thread is granted and now holds the
// name. The unlock() that pairs with the lost hold must leave the new hold alone, or another
// client is granted the name while the second thread is still in its critical section.
class LostAndReplaced {
 public:
  explicit LostAndReplaced(const char* space)
      : space_(space), mutex_(open(std::string("mem://") + space + "?lease=300ms"), "job") {}
  ~LostAndReplaced() { let_b_leave(); }
  Mutex& mutex() { return mutex_; }
  // Starts thread B waiting on the Mutex (the caller has locked it), breaks the lock and
  // waits until B is inside its critical section.
  bool break_and_let_b_in() {
    b_ = std::thread([this] {
      std::lock_guard guard(mutex_);
      b_token_ = mutex_.fencing_token();
      b_in_ = true;
      while (!b_leave_) std::this_thread::sleep_for(1ms);
    });
    std::this_thread::sleep_for(50ms);  // B waits on the held lock
    mem::break_lock(space_, "job");
    return eventually([&] { return b_in_.load(); });
  }
  // Whether a client of another process could take the name now.
  bool another_client_gets_it() { return open(std::string("mem://") + space_)->try_lock("job").has_value(); }
  void let_b_leave() {
    b_leave_ = true;
    if (b_.joinable()) b_.join();
  }
  std::uint64_t b_token() const { return b_token_; }

 private:
  std::string space_;
  Mutex mutex_;
  std::thread b_;
  std::atomic<bool> b_in_{false}, b_leave_{false};
  std::uint64_t b_token_ = 0;
};

TEST(Mutex, UnlockPairedWithALostHoldLeavesTheNextHolderAlone) {
  LostAndReplaced t("mutex-lost-replaced");
  t.mutex().lock();  // this thread is A
  ASSERT_TRUE(t.break_and_let_b_in());
  t.mutex().unlock();  // A's std::lock_guard ends here: its hold was lost
  EXPECT_FALSE(t.another_client_gets_it()) << "A's unlock() released B's hold: double grant";
  t.let_b_leave();
  EXPECT_TRUE(t.another_client_gets_it()) << "B's unlock() did not release its hold";
}

TEST(Mutex, UnlockFromAnotherThreadEndsTheLostHoldBeforeTheNewerOne) {
  LostAndReplaced t("mutex-lost-handover");
  std::thread([&] { t.mutex().lock(); }).join();  // A locks and hands the unlock over to this thread
  ASSERT_TRUE(t.break_and_let_b_in());
  t.mutex().unlock();  // the unlock for A's (lost) hold
  EXPECT_FALSE(t.another_client_gets_it()) << "the handed-over unlock() released B's hold: double grant";
  t.let_b_leave();
  EXPECT_TRUE(t.another_client_gets_it()) << "B's unlock() did not release its hold";
}

TEST(Mutex, AThreadWhoseHoldWasLostAndReplacedStillSeesItsOwnHold) {
  LostAndReplaced t("mutex-lost-own");
  Mutex& m = t.mutex();
  m.lock();
  const std::uint64_t mine = m.fencing_token();
  ASSERT_TRUE(t.break_and_let_b_in());
  EXPECT_GT(t.b_token(), mine);
  // A must not pick up B's newer token (it would defeat fencing) nor B's unfired lost signal.
  EXPECT_EQ(m.fencing_token(), mine) << "this thread was given the next holder's fencing token";
  EXPECT_TRUE(eventually([&] { return m.lost_token().stop_requested(); }, 2s))
      << "this thread was given the next holder's lost signal";
  // A has not unlocked: locking again is a re-entry, refused as for a hold still held.
  try {
    (void)m.try_lock();
    ADD_FAILURE() << "expected would_deadlock";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::would_deadlock);
  }
  m.unlock();
  EXPECT_FALSE(t.another_client_gets_it());
  t.let_b_leave();
  EXPECT_EQ(m.fencing_token(), 0u);
}

// A deadline is converted to a Wait through "time left now": with extreme values (min(),
// max(), coarse units, infinities) that subtraction or cast overflows and wraps, so a past
// deadline became a wait forever and a far-future one a single attempt.
template <class Clock, class Duration>
void expect_try_once(const std::chrono::time_point<Clock, Duration>& t, const char* what) {
  const auto start = Wait::Clock::now();
  EXPECT_LE(detail::wait_until(t).deadline_from(start), start) << what << ": a past deadline must mean one attempt";
}
template <class Clock, class Duration>
void expect_forever(const std::chrono::time_point<Clock, Duration>& t, const char* what) {
  const auto start = Wait::Clock::now();
  EXPECT_EQ(detail::wait_until(t).deadline_from(start), Wait::Clock::time_point::max())
      << what << ": a far-future deadline must mean forever";
}

TEST(Mutex, ExtremeDeadlinesSaturateInsteadOfWrapping) {
  using namespace std::chrono;
  constexpr double inf = std::numeric_limits<double>::infinity();
  using SysMs = time_point<system_clock, milliseconds>;
  using SysHours = time_point<system_clock, hours>;
  using SysSeconds = time_point<system_clock, duration<double>>;
  using SteadyMs = time_point<steady_clock, milliseconds>;
  using SteadyHours = time_point<steady_clock, hours>;
  using SteadySeconds = time_point<steady_clock, duration<double>>;

  expect_try_once(system_clock::time_point::min(), "system_clock min");
  expect_try_once(SysMs::min(), "system_clock/ms min");
  expect_try_once(SysHours::min(), "system_clock/hours min");
  expect_try_once(SysSeconds(duration<double>(-inf)), "system_clock/double -inf");
  expect_try_once(SysSeconds(duration<double>(std::nan(""))), "system_clock/double NaN");
  expect_try_once(system_clock::now() - 1s, "system_clock now - 1s");
  expect_try_once(file_clock::time_point::min(), "file_clock min");
  expect_try_once(steady_clock::time_point::min(), "steady_clock min");
  expect_try_once(SteadyMs::min(), "steady_clock/ms min");
  expect_try_once(SteadyHours::min(), "steady_clock/hours min");
  expect_try_once(SteadySeconds(duration<double>(-inf)), "steady_clock/double -inf");

  expect_forever(system_clock::time_point::max(), "system_clock max");
  expect_forever(SysMs::max(), "system_clock/ms max");
  expect_forever(SysHours::max(), "system_clock/hours max");
  expect_forever(SysSeconds(duration<double>(inf)), "system_clock/double +inf");
  expect_forever(file_clock::time_point::max(), "file_clock max");
  expect_forever(steady_clock::time_point::max(), "steady_clock max");
  expect_forever(SteadyMs::max(), "steady_clock/ms max");
  expect_forever(SteadyHours::max(), "steady_clock/hours max");
  expect_forever(SteadySeconds(duration<double>(inf)), "steady_clock/double +inf");

  // Ordinary deadlines stay deadlines.
  const auto start = Wait::Clock::now();
  EXPECT_EQ(detail::wait_until(start + 1h).deadline_from(start), start + 1h);
  const auto steady_ms = ceil<milliseconds>(start + 1h);
  EXPECT_EQ(detail::wait_until(steady_ms).deadline_from(start), steady_ms);
  const auto sys = detail::wait_until(system_clock::now() + 1h).deadline_from(start);
  EXPECT_GT(sys, start + 59min);
  EXPECT_LE(sys, Wait::Clock::now() + 1h);

  // Durations, the same way.
  EXPECT_LE(detail::wait_for(hours::min()).deadline_from(start), start);
  EXPECT_LE(detail::wait_for(duration<double>(-inf)).deadline_from(start), start);
  EXPECT_LE(detail::wait_for(duration<double>(std::nan(""))).deadline_from(start), start);
  EXPECT_LE(detail::wait_for(-1ns).deadline_from(start), start);
  EXPECT_TRUE(detail::wait_for(hours::max()).is_forever());
  EXPECT_TRUE(detail::wait_for(nanoseconds::max()).is_forever());
  EXPECT_TRUE(detail::wait_for(duration<double>(inf)).is_forever());
  EXPECT_EQ(detail::wait_for(100ms).deadline_from(start), start + 100ms);
}

TEST(Mutex, TryLockUntilThePastOfAnotherClockIsOneAttempt) {
  auto p = provider("mutex-until-min");
  auto held = p->lock("job");  // someone else holds it
  std::stop_source give_up;     // ends a wrongly infinite wait so the test cannot hang
  Mutex m(p, "job", {.cancel = give_up.get_token()});
  auto attempt = std::async(std::launch::async, [&] {
    return m.try_lock_until(std::chrono::system_clock::time_point::min());
  });
  const bool returned = attempt.wait_for(3s) == std::future_status::ready;
  give_up.request_stop();
  EXPECT_TRUE(returned) << "try_lock_until(system_clock::time_point::min()) was still waiting after 3s";
  EXPECT_FALSE(attempt.get());
}

// glibc gives an exited thread's std::thread::id to a later thread. Runs `body` on new
// threads until one gets `id` (bounded); false if none did.
template <class Body>
bool run_on_a_thread_reusing(std::thread::id id, Body body) {
  for (int i = 0; i < 200; ++i) {
    bool reused = false;
    std::thread([&] {
      reused = std::this_thread::get_id() == id;
      if (reused) body();
    }).join();
    if (reused) return true;
  }
  return false;
}

TEST(Mutex, ANewThreadWithAReusedThreadIdIsNotTheHolder) {
  Mutex m(provider("mutex-id-reuse"), "job");
  std::thread::id locker;
  std::thread([&] {
    locker = std::this_thread::get_id();
    m.lock();  // left locked: unlock() may come from any thread
  }).join();
  bool got = false;
  bool threw = false;
  std::string what;
  const bool reused = run_on_a_thread_reusing(locker, [&] {
    try {
      got = m.try_lock();
    } catch (const Error& e) {
      threw = true;
      what = e.what();
    }
  });
  m.unlock();
  ASSERT_TRUE(reused) << "no thread reused the exited thread's id: the case was not exercised";
  EXPECT_FALSE(threw) << "a thread that never locked it was taken for the holder: " << what;
  EXPECT_FALSE(got) << "granted while another owner holds it";
}

TEST(SharedMutex, ANewThreadWithAReusedThreadIdHasNoSharedHold) {
  SharedMutex m(provider("shared-id-reuse"), "table");
  std::thread::id reader;
  std::thread([&] {
    reader = std::this_thread::get_id();
    m.lock_shared();  // never unlocked: the hold stays until the SharedMutex is destroyed
  }).join();
  bool got = false;
  bool threw = false;
  std::string what;
  const bool reused = run_on_a_thread_reusing(reader, [&] {
    try {
      got = m.try_lock_shared();
      if (got) m.unlock_shared();  // its own hold, not the exited thread's
    } catch (const Error& e) {
      threw = true;
      what = e.what();
    }
  });
  ASSERT_TRUE(reused) << "no thread reused the exited thread's id: the case was not exercised";
  EXPECT_FALSE(threw) << "a thread that never read was taken for the reader: " << what;
  EXPECT_TRUE(got);
  EXPECT_FALSE(m.try_lock()) << "the exited thread's shared hold was released by another thread";
}

TEST(SharedMutex, AReaderWhoseHoldWasLostSeesItsOwnTokenNotTheNextWriters) {
  const char* space = "shared-lost-reader";
  SharedMutex m(open(std::string("mem://") + space + "?lease=300ms"), "table");
  m.lock_shared();  // this thread reads
  const std::uint64_t mine = m.fencing_token();
  std::atomic<bool> w_in{false}, w_leave{false};
  std::thread writer([&] {
    std::lock_guard guard(m);
    w_in = true;
    while (!w_leave) std::this_thread::sleep_for(1ms);
  });
  std::this_thread::sleep_for(50ms);  // the writer waits for the reader
  mem::break_lock(space, "table");
  EXPECT_TRUE(eventually([&] { return w_in.load(); }));
  EXPECT_EQ(m.fencing_token(), mine) << "the reader was given the writer's newer fencing token";
  m.unlock_shared();
  EXPECT_FALSE(open(std::string("mem://") + space)->try_lock("table").has_value())
      << "the reader's unlock_shared() released the writer's hold";
  w_leave = true;
  writer.join();
}

TEST(SharedMutex, ReadersShareWritersExclude) {
  auto p = provider("shared-rw");
  SharedMutex m(p, "table");
  std::shared_lock reader(m);
  ASSERT_TRUE(reader.owns_lock());
  EXPECT_NE(m.fencing_token(), 0u);
  std::thread other([&] {
    {
      std::shared_lock second(m, std::try_to_lock);
      EXPECT_TRUE(second.owns_lock());
    }
    EXPECT_FALSE(m.try_lock());  // a reader (the main thread) keeps the writer out
  });
  other.join();
  EXPECT_THROW((void)m.try_lock_shared(), Error);  // this thread already reads
  reader.unlock();
  std::unique_lock writer(m, 1s);
  ASSERT_TRUE(writer.owns_lock());
  std::thread late_reader([&] { EXPECT_FALSE(m.try_lock_shared_for(20ms)); });
  late_reader.join();
}

TEST(SharedMutex, UpgradeIsRefusedNotDeadlocked) {
  SharedMutex m(provider("shared-upgrade"), "table");
  std::shared_lock reader(m);
  try {
    (void)m.try_lock_for(1s);
    FAIL() << "expected would_deadlock";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::would_deadlock);
  }
}

}  // namespace
}  // namespace dlock
