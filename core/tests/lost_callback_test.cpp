// What a lost callback may do when it runs on the thread that told of the loss: a session
// backend's own thread (a pool's monitor, a client library's event thread). Dropping or
// releasing the lost Lease there must neither end the provider on that thread (its backend
// joins the thread in its destructor: the thread would join itself) nor wait on a backend
// call that only that thread can answer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dlock/dlock.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/spi/session_holds.h"
#include "eventually.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::eventually;

// A session backend with an event thread of its own, shaped like ZooKeeper's client: the
// thread tells of a session's end (SessionHolds::mark_all_lost), and it also delivers the
// answer of every release (a release waits for it, up to 2 s). Its destructor joins it.
// Where a real backend would end the process (joining the thread it runs on) or hang, this
// one records what happened, so the test can say so.
class EventThreadBackend final : public spi::Backend {
 public:
  struct Events {
    std::mutex mu;
    std::condition_variable cv;
    bool end_session = false;  // guarded by mu
    int releases_asked = 0;    // guarded by mu
    int releases_answered = 0; // guarded by mu
    bool stop = false;         // guarded by mu
    spi::SessionHolds holds;
    std::atomic<bool> destroyed_on_its_thread{false};
    std::atomic<bool> release_unanswered{false};
    std::atomic<bool> destroyed{false};
    // Releases answer at once instead of through the event thread (as a SQL backend's do).
    std::atomic<bool> releases_answer_themselves{false};

    // Has the event thread tell of the session's end.
    void end() {
      {
        std::lock_guard guard(mu);
        end_session = true;
      }
      cv.notify_all();
    }
  };

  explicit EventThreadBackend(std::shared_ptr<Events> events) : events_(std::move(events)) {
    caps_.default_lease = 10s;
    caps_.liveness = Liveness::session;
    caps_.lost_signal_bound = 10s;
    caps_.crash_release_bound = 10s;
    thread_ = std::thread([e = events_] { run(*e); });
  }

  ~EventThreadBackend() override {
    {
      std::lock_guard guard(events_->mu);
      events_->stop = true;
    }
    events_->cv.notify_all();
    events_->destroyed = true;
    if (thread_.get_id() == std::this_thread::get_id()) {
      events_->destroyed_on_its_thread = true;  // a real backend: std::system_error, abort
      thread_.detach();
      return;
    }
    thread_.join();
  }

  const Capabilities& capabilities() const noexcept override { return caps_; }

  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()>) override {
    class Grant final : public spi::Acquisition {
     public:
      Grant(const spi::AttemptRequest& r, spi::SessionHolds& holds) : r_(r), holds_(holds) {}
      spi::Attempt attempt() override {
        auto lock = std::make_shared<spi::HeldLock>(std::string(r_.name), r_.mode, std::string(r_.owner_key), 1,
                                                    Clock::now() + 10s);
        holds_.add(lock);
        return lock;
      }
      milliseconds fallback_poll() const noexcept override { return 1h; }

     private:
      const spi::AttemptRequest& r_;
      spi::SessionHolds& holds_;
    };
    return std::make_unique<Grant>(request, events_->holds);
  }

  // Answered by the event thread, as a client library's completion is.
  bool release(spi::HeldLock&) override {
    if (events_->releases_answer_themselves) return true;
    std::unique_lock guard(events_->mu);
    const int mine = ++events_->releases_asked;
    events_->cv.notify_all();
    if (!events_->cv.wait_for(guard, 2s, [&] { return events_->releases_answered >= mine; })) {
      events_->release_unanswered = true;
      throw Error(ErrorCode::unavailable, "event thread: no answer to the release");
    }
    return true;
  }

  void extend_many(std::span<spi::HeldLock* const> locks, milliseconds,
                   std::span<spi::RenewStatus> out) noexcept override {
    for (std::size_t i = 0; i < locks.size(); ++i) {
      locks[i]->set_server_expiry(Clock::now() + 10s);
      out[i] = spi::RenewStatus::renewed;
    }
  }


 private:
  static void run(Events& e) {
    std::unique_lock guard(e.mu);
    while (!e.stop) {
      if (e.releases_answered < e.releases_asked) {
        e.releases_answered = e.releases_asked;
        e.cv.notify_all();
      } else if (e.end_session) {
        e.end_session = false;
        guard.unlock();
        e.holds.mark_all_lost();  // lost callbacks run here
        guard.lock();
      } else {
        e.cv.wait(guard);
      }
    }
  }

  std::shared_ptr<Events> events_;
  Capabilities caps_;
  std::thread thread_;
};

struct EventThreadProvider {
  std::shared_ptr<EventThreadBackend::Events> events = std::make_shared<EventThreadBackend::Events>();
  std::shared_ptr<ILockProvider> provider;

  EventThreadProvider() {
    provider = spi::make_provider(std::make_shared<EventThreadBackend>(events), "event-thread://");
  }
};

TEST(LostCallback, DroppingTheLastLeaseOnTheBackendsThreadEndsTheProviderElsewhere) {
  EventThreadProvider s;
  std::optional<Lease> lease = s.provider->try_lock("n");
  ASSERT_TRUE(lease);
  std::atomic<bool> dropped{false};
  auto* slot = &lease;
  auto* flag = &dropped;
  lease->on_lost([slot, flag] {
    std::optional<Lease> dying = std::move(*slot);
    slot->reset();
    flag->store(true);
  });  // `dying` ends here: this callback is gone with it
  s.provider.reset();  // the Lease holds the provider's last reference now
  s.events->end();

  ASSERT_TRUE(eventually([&] { return dropped.load(); }, 2s)) << "the lost callback never ran";
  ASSERT_TRUE(eventually([&] { return s.events->destroyed.load(); }, 3s))
      << "the provider outlived its last reference";
  EXPECT_FALSE(s.events->destroyed_on_its_thread.load())
      << "the provider ended on the backend's own thread, whose destructor joins it (the process aborts)";
  EXPECT_FALSE(s.events->release_unanswered.load())
      << "the release waited on the backend's thread for an answer only that thread gives";
}

TEST(LostCallback, DroppingTheLeaseThenTheProviderOnTheBackendsThreadEndsItElsewhere) {
  EventThreadProvider s;
  s.events->releases_answer_themselves = true;
  std::optional<Lease> lease = s.provider->try_lock("n");
  ASSERT_TRUE(lease);
  std::atomic<bool> dropped{false};
  auto* slot = &lease;
  auto* provider = &s.provider;
  auto* flag = &dropped;
  lease->on_lost([slot, provider, flag] {
    std::optional<Lease> dying = std::move(*slot);
    std::shared_ptr<ILockProvider> last = std::move(*provider);
    flag->store(true);
    dying.reset();  // its release and its reference go to the watchdog's worker...
    std::this_thread::sleep_for(50ms);  // ...which is done with them by now
    // `last`, the provider's last reference now, ends here: this callback is gone with the Lease
  });
  s.events->end();

  ASSERT_TRUE(eventually([&] { return dropped.load(); }, 2s)) << "the lost callback never ran";
  ASSERT_TRUE(eventually([&] { return s.events->destroyed.load(); }, 3s))
      << "the provider outlived its last reference";
  EXPECT_FALSE(s.events->destroyed_on_its_thread.load())
      << "the provider ended on the backend's own thread, whose destructor joins it (the process aborts)";
}

TEST(LostCallback, ReleasingTheLostLeaseOnTheBackendsThreadDoesNotWaitOnIt) {
  EventThreadProvider s;
  std::optional<Lease> lease = s.provider->try_lock("n");
  ASSERT_TRUE(lease);
  std::atomic<bool> returned{false};
  std::atomic<long long> took_ms{-1};
  auto* slot = &lease;
  lease->on_lost([slot, &returned, &took_ms] {
    const auto start = Clock::now();
    (*slot)->release();
    took_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    returned = true;
  });
  s.events->end();

  ASSERT_TRUE(eventually([&] { return returned.load(); }, 4s)) << "release() in the lost callback never returned";
  EXPECT_LT(took_ms.load(), 500) << "release() in the lost callback waited " << took_ms.load() << " ms";
  EXPECT_FALSE(s.events->release_unanswered.load())
      << "the release waited on the backend's thread for an answer only that thread gives";
  // The clean-up release still reaches the backend, from another thread.
  EXPECT_TRUE(eventually(
      [&] {
        std::lock_guard guard(s.events->mu);
        return s.events->releases_answered >= 1;
      },
      2s));
}

}  // namespace
}  // namespace dlock
