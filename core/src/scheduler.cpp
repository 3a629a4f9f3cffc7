#include "scheduler.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "provider_core.h"

namespace dlock::detail {

using std::chrono::milliseconds;

struct Scheduler::Shared {
  std::shared_ptr<spi::Backend> backend;
  std::mutex mu;
  std::condition_variable timekeeper_cv;
  std::condition_variable worker_cv;
  bool stop = false;                              // guarded by mu
  std::vector<std::weak_ptr<HoldState>> entries;  // guarded by mu
  std::size_t compacted_size = 0;                 // entries after the last compaction
  std::deque<std::function<void()>> jobs;         // for the worker; guarded by mu
  // When the sleeping timekeeper wakes next; time_point::min() while it is awake (it
  // re-plans under mu before sleeping, so it sees every entry added meanwhile).
  Clock::time_point sleeping_until = Clock::time_point::min();
};

milliseconds loss_margin(milliseconds lease) {
  return std::min(std::max(lease / 20, milliseconds(5)), lease / 4);
}

namespace {

// Renewals due within this slack of each other share one extend_many call.
Clock::duration batch_slack(milliseconds lease) { return lease / 12; }
milliseconds retry_delay(milliseconds lease) {
  return std::clamp(lease / 10, milliseconds(10), milliseconds(1000));
}

Clock::time_point loss_deadline(const HoldState& st) {
  Clock::time_point expiry = st.lock->expires_at();
  if (expiry == Clock::time_point::max()) return expiry;
  return expiry - loss_margin(st.lease_length);
}

struct Tick {
  std::vector<std::shared_ptr<HoldState>> to_end;      // give up and release now
  std::vector<std::shared_ptr<HoldState>> to_signal;   // lease about to end: give up only
  std::vector<std::shared_ptr<HoldState>> to_release;  // given up earlier, release now
  std::map<milliseconds, std::vector<std::shared_ptr<HoldState>>> due;  // by lease length
  Clock::time_point next_wake = Clock::time_point::max();
};

// Under shared.mu: drops finished entries and sorts the rest into what is due now.
Tick plan_tick(Scheduler::Shared& shared, Clock::time_point now) {
  Tick t;
  std::vector<std::shared_ptr<HoldState>> candidates;  // renewals due within the slack
  Clock::time_point earliest_candidate = Clock::time_point::max();
  auto& entries = shared.entries;
  for (std::size_t i = 0; i < entries.size();) {
    auto st = entries[i].lock();
    bool pending_release = st && st->release_at != Clock::time_point::max();
    if (!st || ((st->ended || st->lock->lost()) && !pending_release)) {
      entries[i] = std::move(entries.back());
      entries.pop_back();
      continue;
    }
    ++i;
    if (pending_release) {
      if (now >= st->release_at) {
        st->release_at = Clock::time_point::max();
        t.to_release.push_back(std::move(st));
      } else {
        t.next_wake = std::min(t.next_wake, st->release_at);
      }
      continue;
    }
    if (now >= st->max_hold_deadline) {
      t.to_end.push_back(std::move(st));
      continue;
    }
    if (now >= loss_deadline(*st)) {
      // Told a margin early; the lock itself lasts its lease: the server expires a lease,
      // the client releases a session lock when its lease ends.
      if (shared.backend->capabilities().liveness == Liveness::session) {
        st->release_at = st->lock->expires_at();
      }
      t.to_signal.push_back(std::move(st));
      continue;
    }
    t.next_wake = std::min({t.next_wake, st->max_hold_deadline, loss_deadline(*st)});
    if (st->renew_lease && !st->renewing) {
      if (st->next_renew <= now + batch_slack(*st->renew_lease)) {
        earliest_candidate = std::min(earliest_candidate, st->next_renew);
        candidates.push_back(std::move(st));
      } else {
        t.next_wake = std::min(t.next_wake, st->next_renew);
      }
    }
  }
  // A renewal pass starts only when a lease is actually due, and then takes every lease due
  // within the slack. Sliding the window on every wake-up would renew a trickle of one or
  // two leases at a time while leases are being acquired.
  if (earliest_candidate <= now) {
    for (auto& st : candidates) {
      st->renewing = true;
      t.due[*st->renew_lease].push_back(std::move(st));
    }
  } else {
    t.next_wake = std::min(t.next_wake, earliest_candidate);
  }
  return t;
}

// On the worker: one extend_many for `group`, then the outcome of each.
void renew(Scheduler::Shared& shared, milliseconds lease, std::vector<std::shared_ptr<HoldState>> group) {
  std::vector<spi::HeldLock*> locks;
  for (auto& st : group) locks.push_back(st->lock.get());
  std::vector<spi::RenewStatus> out(locks.size(), spi::RenewStatus::failed);
  Clock::time_point sent = Clock::now();
  shared.backend->extend_many(locks, lease, out);
  std::vector<std::shared_ptr<HoldState>> lost;
  {
    std::lock_guard lock(shared.mu);
    for (std::size_t i = 0; i < group.size(); ++i) {
      auto& st = group[i];
      st->renewing = false;
      switch (out[i]) {
        case spi::RenewStatus::renewed: st->next_renew = sent + lease / 3; break;
        case spi::RenewStatus::not_held:
          st->next_renew = Clock::time_point::max();
          lost.push_back(st);
          break;
        case spi::RenewStatus::failed: st->next_renew = Clock::now() + retry_delay(lease); break;
      }
    }
  }
  shared.timekeeper_cv.notify_all();
  for (auto& st : lost) {
    if (st->core->give_up(*st)) st->core->release_given_up(*st);
  }
}

void run_timekeeper(std::shared_ptr<Scheduler::Shared> shared) {
  std::unique_lock lock(shared->mu);
  while (!shared->stop) {
    Tick t = plan_tick(*shared, Clock::now());
    for (auto& [lease, group] : t.due) {
      shared->jobs.push_back([s = shared.get(), lease = lease, g = std::move(group)]() mutable {
        renew(*s, lease, std::move(g));
      });
    }
    if (!t.to_end.empty() || !t.to_signal.empty() || !t.to_release.empty() || !t.due.empty()) {
      lock.unlock();
      // Lost signals fire here, on time; releases wait for the worker.
      std::vector<std::function<void()>> releases;
      auto release_later = [&](const std::shared_ptr<HoldState>& st) {
        releases.emplace_back([st] { st->core->release_given_up(*st); });
      };
      for (auto& st : t.to_end) {
        if (st->core->give_up(*st)) release_later(st);
      }
      for (auto& st : t.to_signal) st->core->give_up(*st);
      for (auto& st : t.to_release) release_later(st);
      t = Tick{};  // drop our references outside the lock
      lock.lock();
      shared->jobs.insert(shared->jobs.end(), std::make_move_iterator(releases.begin()),
                          std::make_move_iterator(releases.end()));
      shared->worker_cv.notify_one();
      continue;  // re-plan; `releases` holds only moved-from (empty) functions now
    }
    if (shared->stop) break;
    shared->sleeping_until = t.next_wake;
    shared->timekeeper_cv.wait_until(lock, t.next_wake);
    shared->sleeping_until = Clock::time_point::min();
  }
}

void run_worker(std::shared_ptr<Scheduler::Shared> shared) {
  std::unique_lock lock(shared->mu);
  while (true) {
    shared->worker_cv.wait(lock, [&] { return shared->stop || !shared->jobs.empty(); });
    if (shared->stop) break;
    auto job = std::move(shared->jobs.front());
    shared->jobs.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // may drop the last reference to a hold (and its provider) here
    lock.lock();
  }
}

void stop_thread(std::thread& t) {
  if (t.get_id() == std::this_thread::get_id()) {
    t.detach();
  } else {
    t.join();
  }
}

}  // namespace

Scheduler::Scheduler(std::shared_ptr<spi::Backend> backend)
    : shared_(std::make_shared<Shared>()), owner_pid_(::getpid()) {
  shared_->backend = std::move(backend);
  timekeeper_ = std::make_unique<std::thread>(run_timekeeper, shared_);
  worker_ = std::make_unique<std::thread>(run_worker, shared_);
}

Scheduler::~Scheduler() {
  if (::getpid() != owner_pid_) {
    // A forked child: no threads to join or detach, and a mutex that may stay locked forever.
    static_cast<void>(timekeeper_.release());
    static_cast<void>(worker_.release());
    static_cast<void>(new std::shared_ptr<Shared>(std::move(shared_)));
    return;
  }
  {
    std::lock_guard lock(shared_->mu);
    shared_->stop = true;  // no job can be pending: each would keep this provider alive
  }
  shared_->timekeeper_cv.notify_all();
  shared_->worker_cv.notify_all();
  stop_thread(*timekeeper_);
  stop_thread(*worker_);
}

void Scheduler::watch(const std::shared_ptr<HoldState>& state, std::optional<milliseconds> renew_lease,
                      milliseconds lease, Clock::time_point max_hold_deadline) {
  bool sooner;
  {
    std::lock_guard lock(shared_->mu);
    state->renew_lease = renew_lease;
    state->lease_length = lease;
    state->next_renew = renew_lease ? Clock::now() + *renew_lease / 3 : Clock::time_point::max();
    state->max_hold_deadline = max_hold_deadline;
    auto& entries = shared_->entries;
    if (entries.size() >= 2 * shared_->compacted_size + 1024) {
      // Released holds linger as expired entries until the next tick, which may be a third
      // of a long lease away: compact here, amortized O(1) per acquire.
      std::erase_if(entries, [](const auto& e) { return e.expired(); });
      shared_->compacted_size = entries.size();
    }
    entries.push_back(state);
    Clock::time_point first = std::min({state->next_renew, max_hold_deadline, loss_deadline(*state)});
    sooner = first < shared_->sleeping_until;
  }
  // Only a hold due before the planned wake-up needs the timekeeper now: most acquires
  // don't cost a context switch.
  if (sooner) shared_->timekeeper_cv.notify_all();
}

void Scheduler::stop_renewing(HoldState& state, milliseconds lease) {
  {
    std::lock_guard lock(shared_->mu);
    state.renew_lease.reset();
    state.lease_length = lease;
    state.next_renew = Clock::time_point::max();
  }
  shared_->timekeeper_cv.notify_all();  // the loss deadline moved
}

}  // namespace dlock::detail
