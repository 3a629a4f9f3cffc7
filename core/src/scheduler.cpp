#include "scheduler.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/error.h"
#include "provider_core.h"
#include "sync.h"

namespace dlock::detail {

using std::chrono::milliseconds;

struct ReleaseRetry {
  std::shared_ptr<spi::HeldLock> lock;
  Clock::time_point next_try, give_up;  // give_up: the lock ends on its own by then
  milliseconds backoff;                 // before next_try: 50 ms doubling to 1 s
};

struct Scheduler::Shared {
  std::shared_ptr<spi::Backend> backend;
  // Also guards the watchdog's fields of every HoldState (see hold.h).
  Mutex mu;
  std::condition_variable timekeeper_cv;  // waits on mu
  std::condition_variable worker_cv;      // waits on mu
  bool stop DLOCK_GUARDED_BY(mu) = false;
  std::vector<std::weak_ptr<HoldState>> entries DLOCK_GUARDED_BY(mu);
  std::size_t compacted_size DLOCK_GUARDED_BY(mu) = 0;  // entries after the last compaction
  std::deque<std::function<void()>> jobs DLOCK_GUARDED_BY(mu);  // for the worker
  // Releases that failed with `unavailable` (Scheduler::retry_release), waiting to be tried
  // again. They co-own the backend's lock only, never a HoldState (which owns the provider):
  // dropping the provider drops them.
  std::vector<ReleaseRetry> retries DLOCK_GUARDED_BY(mu);
  // When the timekeeper wakes next; time_point::min() while it plans (under mu, so it sees
  // every entry added before).
  Clock::time_point sleeping_until DLOCK_GUARDED_BY(mu) = Clock::time_point::min();
  // The plan may have changed since the timekeeper made it: the timekeeper plans again
  // before sleeping. Set under mu by every change that notifies timekeeper_cv (the
  // timekeeper drops its references to holds outside mu, between planning and sleeping,
  // and a notify in that window would be lost), and by poke() without it (it runs in lost
  // callbacks, which may race with the destruction of a hold under the mutex).
  std::atomic<bool> poked{false};
};

milliseconds loss_margin(milliseconds lease) {
  // The margin must outlast a late timekeeper: on a loaded machine (load 10 on 2 cores) its
  // wake-up came 23 ms late and a 5 ms margin let the next holder in 26 µs before the lost
  // signal. 50 ms covers such scheduling delays; a quarter of the lease caps it for short ones.
  return std::min(std::max(lease / 20, milliseconds(50)), lease / 4);
}

namespace {

// Renewals due within this slack of each other share one extend_many call.
Clock::duration batch_slack(milliseconds lease) { return lease / 12; }
milliseconds retry_delay(milliseconds lease) {
  return std::clamp(lease / 10, milliseconds(10), milliseconds(1000));
}

struct GiveUp {
  std::shared_ptr<HoldState> state;
  Clock::time_point release_at;  // when the backend's release runs
};

struct Tick {
  // Every hold the plan looked at. One may be the last reference to its provider, whose
  // ~Scheduler takes shared.mu: a Tick dies outside it.
  std::vector<std::shared_ptr<HoldState>> held;
  std::vector<GiveUp> to_give_up;                      // lost signal now, release later
  std::vector<std::shared_ptr<HoldState>> to_release;  // given up earlier, release now
  std::vector<ReleaseRetry> to_retry;                  // failed releases due again
  std::map<milliseconds, std::vector<std::shared_ptr<HoldState>>> due;  // by lease length
  Clock::time_point next_wake = Clock::time_point::max();
};

// Under shared.mu: drops finished entries and sorts the rest into what is due now. The
// Tick co-owns every hold it names (see Tick::held).
Tick plan_tick(Scheduler::Shared& shared, Clock::time_point now) DLOCK_REQUIRES(shared.mu) {
  Tick t;
  std::vector<std::shared_ptr<HoldState>> candidates;  // renewals due within the slack
  Clock::time_point earliest_candidate = Clock::time_point::max();
  auto& retries = shared.retries;
  for (std::size_t i = 0; i < retries.size();) {
    if (retries[i].next_try <= now) {
      t.to_retry.push_back(std::move(retries[i]));
      retries[i] = std::move(retries.back());
      retries.pop_back();
    } else {
      t.next_wake = std::min(t.next_wake, retries[i].next_try);
      ++i;
    }
  }
  auto& entries = shared.entries;
  for (std::size_t i = 0; i < entries.size();) {
    auto st = entries[i].lock();
    if (st) t.held.push_back(st);  // so that no other reference taken here is the last
    bool pending_release = st && st->release_at != Clock::time_point::max();
    if (!st || (st->ended && !pending_release && !st->renewing)) {
      if (st) st->watched = false;
      entries[i] = std::move(entries.back());
      entries.pop_back();
      continue;
    }
    ++i;
    if (st->ended) {
      // Given up: release once no renewal is in flight (its reply could re-arm the lock).
      if (!pending_release || st->renewing) continue;
      if (now >= st->release_at) {
        st->release_at = Clock::time_point::max();
        st->cleaned = true;
        t.to_release.push_back(std::move(st));
      } else {
        t.next_wake = std::min(t.next_wake, st->release_at);
      }
      continue;
    }
    if (st->lock->lost()) {
      // The backend marked it lost (session expired, connection dropped): give it up and
      // make the server forget it (a resumed session must not keep it).
      t.to_give_up.push_back({std::move(st), now});
      continue;
    }
    if (now >= st->max_hold_deadline) {
      t.to_give_up.push_back({std::move(st), now});
      continue;
    }
    if (now >= st->loss_deadline()) {
      // Told a margin early; the lock itself lasts until it runs out: then the core releases
      // it (owner-checked), so nothing a late renewal re-armed outlives the hold.
      Clock::time_point end = st->lock->expires_at();
      t.to_give_up.push_back({std::move(st), end});
      continue;
    }
    t.next_wake = std::min({t.next_wake, st->max_hold_deadline, st->loss_deadline()});
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

// On the worker: one more try of a release that failed with `unavailable`; if it fails
// so again, another is planned after a longer backoff, as long as the lock has not ended.
void retry_release(Scheduler::Shared& shared, ReleaseRetry r) {
  try {
    shared.backend->release(*r.lock);  // owner-checked, idempotent: never another holder's
    return;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unavailable) return;
  } catch (...) {
    return;
  }
  r.backoff = std::min(r.backoff * 2, milliseconds(1000));
  r.next_try = Clock::now() + r.backoff;
  if (r.next_try >= r.give_up) return;
  {
    Lock lock(shared.mu);
    if (shared.stop) return;
    shared.retries.push_back(std::move(r));
    shared.poked = true;
  }
  shared.timekeeper_cv.notify_all();
}

void queue_release(Scheduler::Shared& shared, std::shared_ptr<HoldState> st) DLOCK_REQUIRES(shared.mu) {
  shared.jobs.push_back([st = std::move(st)] { st->core->release_given_up(*st); });
  shared.worker_cv.notify_one();
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
    Lock lock(shared.mu);
    for (std::size_t i = 0; i < group.size(); ++i) {
      auto& st = group[i];
      st->renewing = false;
      if (st->ended) {
        // Given up while the renewal was in flight. If it was already released and this
        // late reply re-armed the lock, release it again: nobody holds it.
        if (out[i] == spi::RenewStatus::renewed && st->cleaned) queue_release(shared, st);
        continue;
      }
      switch (out[i]) {
        case spi::RenewStatus::renewed: st->next_renew = sent + lease / 3; break;
        case spi::RenewStatus::not_held:
          st->next_renew = Clock::time_point::max();
          st->lock->set_server_expiry(Clock::now());  // gone: someone else may hold it now
          lost.push_back(st);
          break;
        case spi::RenewStatus::failed: st->next_renew = Clock::now() + retry_delay(lease); break;
      }
    }
    shared.poked = true;
  }
  shared.timekeeper_cv.notify_all();
  for (auto& st : lost) st->core->give_up(st, Clock::now());
}

void run_timekeeper(std::shared_ptr<Scheduler::Shared> shared) {
  Lock lock(shared->mu);
  while (!shared->stop) {
    shared->poked = false;  // this plan sees every change made so far
    Tick t = plan_tick(*shared, Clock::now());
    for (auto& [lease, group] : t.due) {
      shared->jobs.push_back([s = shared.get(), lease = lease, g = std::move(group)]() mutable {
        renew(*s, lease, std::move(g));
      });
    }
    for (auto& st : t.to_release) queue_release(*shared, std::move(st));
    for (auto& r : t.to_retry) {
      shared->jobs.push_back([s = shared.get(), r = std::move(r)]() mutable { retry_release(*s, std::move(r)); });
    }
    if (!t.due.empty() || !t.to_retry.empty()) shared->worker_cv.notify_one();
    const bool gave_up = !t.to_give_up.empty();
    const Clock::time_point wake = t.next_wake;
    shared->sleeping_until = wake;  // from here on, a sooner hold pokes (watch())
    lock.unlock();
    // Lost signals fire here, on time; the releases follow on the worker.
    for (auto& g : t.to_give_up) g.state->core->give_up(g.state, g.release_at);
    // Our references die outside the lock: if one is the last of the provider, its
    // ~Scheduler runs here (and detaches this thread).
    t = Tick{};
    lock.lock();
    if (shared->stop) break;
    // Re-plan: the given-up holds now wait for their release time; or the plan changed.
    if (!gave_up && !shared->poked.exchange(false)) {
      shared->timekeeper_cv.wait_until(lock.native(), wake);  // any notify re-plans
    }
    shared->sleeping_until = Clock::time_point::min();
  }
}

void run_worker(std::shared_ptr<Scheduler::Shared> shared) {
  Lock lock(shared->mu);
  while (true) {
    while (!shared->stop && shared->jobs.empty()) shared->worker_cv.wait(lock.native());
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
    : shared_(std::make_shared<Shared>()) {
  shared_->backend = std::move(backend);
  try {
    timekeeper_ = std::make_unique<std::thread>(run_timekeeper, shared_);
    worker_ = std::make_unique<std::thread>(run_worker, shared_);
  } catch (const std::system_error& e) {
    // Out of threads (RLIMIT_NPROC, a cgroup's pids.max): a transient condition.
    stop_threads();
    throw Error(ErrorCode::unavailable, std::string("cannot start the watchdog's threads: ") + e.what());
  } catch (...) {
    stop_threads();  // a started thread destroyed joinable would end the process
    throw;
  }
}

Scheduler::~Scheduler() {
  if (owner_.in_forked_child()) {
    // A forked child: no threads to join or detach, and a mutex that may stay locked forever.
    static_cast<void>(timekeeper_.release());
    static_cast<void>(worker_.release());
    static_cast<void>(new std::shared_ptr<Shared>(std::move(shared_)));
    return;
  }
  stop_threads();
}

void Scheduler::stop_threads() noexcept {
  {
    Lock lock(shared_->mu);
    shared_->stop = true;  // no job can be pending: each would keep this provider alive
  }
  shared_->timekeeper_cv.notify_all();
  shared_->worker_cv.notify_all();
  if (timekeeper_) stop_thread(*timekeeper_);
  if (worker_) stop_thread(*worker_);
}

void Scheduler::watch(const std::shared_ptr<HoldState>& state, const WatchPlan& plan) {
  bool sooner;
  {
    Lock lock(shared_->mu);
    state->renew_lease = plan.renew_lease;
    state->server_margin = plan.server_margin;
    state->client_margin = plan.client_margin;
    state->next_renew =
        plan.renew_lease ? Clock::now() + *plan.renew_lease / 3 : Clock::time_point::max();
    state->max_hold_deadline = plan.max_hold_deadline;
    auto& entries = shared_->entries;
    if (entries.size() >= 2 * shared_->compacted_size + 1024) {
      // Released holds linger as expired entries until the next tick, which may be a third
      // of a long lease away: compact here, amortized O(1) per acquire.
      std::erase_if(entries, [](const auto& e) { return e.expired(); });
      shared_->compacted_size = entries.size();
    }
    entries.push_back(state);
    state->watched = true;
    Clock::time_point first =
        std::min({state->next_renew, plan.max_hold_deadline, state->loss_deadline()});
    sooner = first < shared_->sleeping_until;
    if (sooner) shared_->poked = true;
  }
  // Only a hold due before the planned wake-up needs the timekeeper now: most acquires
  // don't cost a context switch.
  if (sooner) shared_->timekeeper_cv.notify_all();
}

void Scheduler::stop_renewing(HoldState& state, milliseconds lease) {
  {
    Lock lock(shared_->mu);
    state.renew_lease.reset();
    state.server_margin = loss_margin(lease);
    state.next_renew = Clock::time_point::max();
    shared_->poked = true;
  }
  shared_->timekeeper_cv.notify_all();  // the loss deadline moved
}

void Scheduler::set_client_lease(HoldState& state, milliseconds lease) {
  {
    Lock lock(shared_->mu);
    state.client_margin = loss_margin(lease);
    shared_->poked = true;
  }
  shared_->timekeeper_cv.notify_all();  // the loss deadline moved
}

void Scheduler::release_given_up_at(const std::shared_ptr<HoldState>& state, Clock::time_point at) {
  {
    Lock lock(shared_->mu);
    // The holder already dropped its Lease (release() ran between the give-up and here).
    state->release_at = state->release_asked ? Clock::now() : at;
    if (!state->watched) {  // dropped meanwhile (or never watched): watch it for the release
      shared_->entries.push_back(state);
      state->watched = true;
    }
    shared_->poked = true;
  }
  shared_->timekeeper_cv.notify_all();
}

bool Scheduler::take_pending_release(HoldState& state) {
  Lock lock(shared_->mu);
  if (state.cleaned) return false;
  if (state.release_at == Clock::time_point::max()) {
    state.release_asked = true;  // the give-up is still on its way: it releases at once
    return false;
  }
  state.release_at = Clock::time_point::max();
  state.cleaned = true;
  return true;
}

void Scheduler::release_dropped(std::shared_ptr<HoldState> state) {
  Lock lock(shared_->mu);
  state->release_at = Clock::time_point::max();
  state->cleaned = true;
  queue_release(*shared_, std::move(state));  // after a renewal of it in flight, if any
}

void Scheduler::dispose(std::shared_ptr<const void> reference) noexcept {
  std::function<void()> job;
  try {
    job = [r = std::move(reference)] {};
    // Handed over and notified under the mutex: once it is unlocked the job may run and end
    // this Scheduler and its Shared (the backend with it), which nothing here may then touch,
    // nor keep alive (a reference kept here could be the backend's last).
    Lock lock(shared_->mu);
    if (!shared_->stop) {
      shared_->jobs.push_back(std::move(job));
      shared_->worker_cv.notify_one();
    }
  } catch (...) {  // out of memory: the reference dies here, as it would have without us
  }
  // A job not handed over (or `reference`) dies here, outside the mutex.
}

void Scheduler::retry_release(std::shared_ptr<spi::HeldLock> lock) {
  const Clock::time_point end = lock->expires_at();
  const milliseconds first(50);
  const Clock::time_point next = Clock::now() + first;
  if (end == Clock::time_point::max() || next >= end) return;  // no end to wait for, or it has come
  {
    Lock guard(shared_->mu);
    if (shared_->stop) return;
    shared_->retries.push_back(ReleaseRetry{std::move(lock), next, end, first});
    shared_->poked = true;
  }
  shared_->timekeeper_cv.notify_all();
}

void Scheduler::poke() noexcept {
  // No mutex here (see Shared::poked). A wake-up lost in the instant before the timekeeper
  // blocks only delays the clean-up to its next planned wake: the lost signal itself has
  // already fired, from the backend's mark_lost().
  shared_->poked.store(true);
  shared_->timekeeper_cv.notify_all();
}

}  // namespace dlock::detail
