// ScriptedBackend: a fake backend whose answers the test scripts, to test the core (not a
// server): grants, busy answers, probes and renewals that answer, fail, stall or find
// nothing, releases, and per-acquire objects, all counted.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlock/error.h"
#include "dlock/spi/backend.h"
#include "dlock/spi/session_holds.h"

namespace dlock::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class ScriptedBackend final : public spi::Backend {
 public:
  // `lease`: default_lease (S for a session backend).
  ScriptedBackend(milliseconds lease, Liveness liveness) {
    caps_.default_lease = lease;
    caps_.liveness = liveness;
    caps_.push_wakeup = true;
    caps_.lost_signal_bound = lease;
    caps_.crash_release_bound = lease;
  }

  const Capabilities& capabilities() const noexcept override { return caps_; }

  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override {
    ++acquisitions_started;
    {
      std::lock_guard guard(mu);
      started_ids.emplace_back(request.owner_key, request.waiter_id);
    }
    return std::make_unique<Acquisition>(*this, request, std::move(wake));
  }

  bool release(spi::HeldLock& lock) override {
    int failing = failing_releases.load();
    while (failing > 0 && !failing_releases.compare_exchange_weak(failing, failing - 1)) {
    }
    if (failing > 0) throw Error(ErrorCode::unavailable, "scripted: no answer to the release");
    std::lock_guard guard(mu);
    releases.push_back({lock.name(), Clock::now()});
    session.remove(lock);
    bool held = holders.erase(lock.name()) > 0;
    if (wake_through_fd) {
      for (int fd : wait_pipes) [[maybe_unused]] auto n = ::write(fd, "x", 1);
    } else {
      for (auto& w : waiters) w();
    }
    return held && release_answer;
  }

  void extend_many(std::span<spi::HeldLock* const> locks, milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override {
    Clock::time_point sent = Clock::now();
    std::this_thread::sleep_for(renew_delay.load());
    std::lock_guard guard(mu);
    renewals.push_back({lease, Clock::now()});
    for (std::size_t i = 0; i < locks.size(); ++i) {
      out[i] = answer.load();
      if (out[i] != spi::RenewStatus::renewed) continue;
      locks[i]->set_server_expiry(estimate(sent, lease));
      holders.insert(locks[i]->name());  // a late renewal re-arms what it renews
    }
  }

  // The server-side end of a hold taken or renewed at `sent`.
  Clock::time_point estimate(Clock::time_point sent, milliseconds lease) const {
    return sent + (caps_.liveness == Liveness::session ? caps_.default_lease : lease);
  }

  std::size_t releases_of(const std::string& name) {
    std::lock_guard guard(mu);
    std::size_t n = 0;
    for (auto& r : releases) n += r.name == name;
    return n;
  }
  std::size_t renewal_count() {
    std::lock_guard guard(mu);
    return renewals.size();
  }
  bool held(const std::string& name) {
    std::lock_guard guard(mu);
    return holders.count(name) > 0;
  }

  struct Release {
    std::string name;
    Clock::time_point at;
  };
  struct Renewal {
    milliseconds lease;
    Clock::time_point at;
  };

  std::mutex mu;
  std::set<std::string> holders;                  // guarded by mu
  std::vector<std::string> owner_keys;            // of every grant, in order; guarded by mu
  // Owner key and waiter id of every begin_acquire, in order; guarded by mu.
  std::vector<std::pair<std::string, std::string>> started_ids;
  std::vector<Release> releases;                  // guarded by mu
  std::vector<Renewal> renewals;                  // guarded by mu
  std::vector<std::function<void()>> waiters;     // wake functions; guarded by mu
  // Set before the first acquire: waiters are told through wait_fd() (a pipe each) instead
  // of their wake function.
  bool wake_through_fd = false;
  std::vector<int> wait_pipes;                    // write ends; guarded by mu
  spi::SessionHolds session;                      // every hold granted (one session)
  std::atomic<spi::RenewStatus> answer{spi::RenewStatus::renewed};
  std::atomic<milliseconds> renew_delay{milliseconds(0)};
  std::atomic<bool> release_answer{true};
  // The next this many releases throw Error(unavailable) and touch nothing (the hold stays).
  std::atomic<int> failing_releases{0};
  // Attempts throw Error(unavailable) until this time.
  std::atomic<Clock::time_point> unavailable_until{Clock::time_point::min()};
  std::atomic<int> acquisitions_started{0};
  std::atomic<int> acquisitions_abandoned{0};  // destroyed without a grant
  std::atomic<int> acquisitions_granted{0};

 private:
  class Acquisition final : public spi::Acquisition {
   public:
    Acquisition(ScriptedBackend& b, const spi::AttemptRequest& r, std::function<void()> wake)
        : b_(b), r_(r) {
      std::lock_guard guard(b_.mu);
      // Told through wait_fd(), a waiter's wake function is not kept (as a socket backend
      // drops it).
      if (!b_.wake_through_fd) b_.waiters.push_back(std::move(wake));
      if (b_.wake_through_fd && ::pipe(pipe_) == 0) b_.wait_pipes.push_back(pipe_[1]);
    }
    ~Acquisition() override {
      if (!granted_) ++b_.acquisitions_abandoned;
      if (pipe_[0] < 0) return;
      std::lock_guard guard(b_.mu);
      std::erase(b_.wait_pipes, pipe_[1]);
      ::close(pipe_[0]);
      ::close(pipe_[1]);
    }
    int wait_fd() const noexcept override { return pipe_[0]; }
    spi::Attempt attempt() override {
      char drained[64];
      if (pipe_[0] >= 0 && ::fcntl(pipe_[0], F_SETFL, O_NONBLOCK) == 0) {
        while (::read(pipe_[0], drained, sizeof drained) > 0) {
        }
      }
      if (Clock::now() < b_.unavailable_until.load()) {
        throw Error(ErrorCode::unavailable, "scripted: server unavailable");
      }
      std::shared_ptr<spi::HeldLock> lock;
      {
        std::lock_guard guard(b_.mu);
        if (!b_.holders.insert(std::string(r_.name)).second) return spi::Busy{};
        b_.owner_keys.emplace_back(r_.owner_key);
        lock = std::make_shared<spi::HeldLock>(std::string(r_.name), r_.mode, std::string(r_.owner_key),
                                               ++b_.next_token_, b_.estimate(Clock::now(), r_.lease));
      }
      b_.session.add(lock);
      granted_ = true;
      ++b_.acquisitions_granted;
      return lock;
    }
    milliseconds fallback_poll() const noexcept override { return std::chrono::hours(24); }

   private:
    ScriptedBackend& b_;
    const spi::AttemptRequest& r_;
    bool granted_ = false;
    int pipe_[2] = {-1, -1};  // with wake_through_fd
  };

  Capabilities caps_;
  std::uint64_t next_token_ = 0;  // guarded by mu
};

}  // namespace dlock::testing
