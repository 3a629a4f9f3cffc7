#include "scheduler.h"

#include <algorithm>
#include <map>

#include <unistd.h>

#include "provider_core.h"

namespace dlock::detail {

using std::chrono::milliseconds;

struct Scheduler::Shared {
  std::shared_ptr<spi::Backend> backend;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;                                // guarded by mu
  std::vector<std::weak_ptr<HoldState>> entries;    // guarded by mu
  // When the sleeping thread wakes next; time_point::min() while it is awake (it re-plans
  // under mu before sleeping, so it sees every entry added meanwhile). Guarded by mu.
  Clock::time_point sleeping_until = Clock::time_point::min();
  std::size_t compacted_size = 0;  // entries after the last compaction; guarded by mu
};

namespace {

// Renewals due within this slack of each other share one extend_many call.
Clock::duration batch_slack(milliseconds lease) { return lease / 12; }
milliseconds retry_delay(milliseconds lease) {
  return std::clamp(lease / 10, milliseconds(10), milliseconds(1000));
}

struct Tick {
  std::vector<std::shared_ptr<HoldState>> to_end;
  std::map<milliseconds, std::vector<std::shared_ptr<HoldState>>> due;  // by lease length
  Clock::time_point next_wake = Clock::time_point::max();
};

// Under shared.mu: drops dead entries, sorts the rest into what is due now.
Tick plan_tick(Scheduler::Shared& shared, Clock::time_point now) {
  Tick t;
  auto& entries = shared.entries;
  for (std::size_t i = 0; i < entries.size();) {
    auto st = entries[i].lock();
    if (!st || st->ended || st->lock->lost()) {
      entries[i] = std::move(entries.back());
      entries.pop_back();
      continue;
    }
    ++i;
    Clock::time_point expiry = st->lock->expires_at();
    if (now >= st->max_hold_deadline || now >= expiry) {
      t.to_end.push_back(std::move(st));
      continue;
    }
    Clock::time_point wake = std::min(st->max_hold_deadline, expiry);
    if (st->renew_lease) {
      if (st->next_renew <= now + batch_slack(*st->renew_lease)) {
        t.due[*st->renew_lease].push_back(st);
        continue;  // rescheduled after the renewal
      }
      wake = std::min(wake, st->next_renew);
    }
    t.next_wake = std::min(t.next_wake, wake);
  }
  return t;
}

void renew(Scheduler::Shared& shared, milliseconds lease, std::vector<std::shared_ptr<HoldState>>& group,
           std::vector<std::shared_ptr<HoldState>>& to_end) {
  std::vector<spi::HeldLock*> locks;
  for (auto& st : group) locks.push_back(st->lock.get());
  std::vector<spi::RenewStatus> out(locks.size(), spi::RenewStatus::failed);
  Clock::time_point sent = Clock::now();
  shared.backend->extend_many(locks, lease, out);
  std::lock_guard lock(shared.mu);
  for (std::size_t i = 0; i < group.size(); ++i) {
    auto& st = group[i];
    switch (out[i]) {
      case spi::RenewStatus::renewed: st->next_renew = sent + lease / 3; break;
      case spi::RenewStatus::not_held:
        st->next_renew = Clock::time_point::max();  // ended below: never renewed again
        to_end.push_back(st);
        break;
      case spi::RenewStatus::failed: st->next_renew = Clock::now() + retry_delay(lease); break;
    }
  }
}

void run(std::shared_ptr<Scheduler::Shared> shared) {
  std::unique_lock lock(shared->mu);
  while (!shared->stop) {
    Tick t = plan_tick(*shared, Clock::now());
    lock.unlock();
    for (auto& [lease, group] : t.due) renew(*shared, lease, group, t.to_end);
    for (auto& st : t.to_end) end_hold(*st);
    bool renewed = !t.due.empty();
    t = Tick{};  // drop our references before sleeping
    lock.lock();
    if (renewed) continue;  // recompute the next wake-up with the new schedule
    Clock::time_point wake = plan_tick(*shared, Clock::now()).next_wake;
    if (shared->stop) break;
    shared->sleeping_until = wake;
    shared->cv.wait_until(lock, wake);
    shared->sleeping_until = Clock::time_point::min();
  }
}

}  // namespace

Scheduler::Scheduler(std::shared_ptr<spi::Backend> backend)
    : shared_(std::make_shared<Shared>()), owner_pid_(::getpid()) {
  shared_->backend = std::move(backend);
  thread_ = std::make_unique<std::thread>(run, shared_);
}

Scheduler::~Scheduler() {
  if (::getpid() != owner_pid_) {
    // A forked child: no thread to join or detach, and a mutex that may stay locked forever.
    static_cast<void>(thread_.release());
    static_cast<void>(new std::shared_ptr<Shared>(std::move(shared_)));
    return;
  }
  {
    std::lock_guard lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->cv.notify_all();
  if (thread_->get_id() == std::this_thread::get_id()) {
    thread_->detach();
  } else {
    thread_->join();
  }
}

void Scheduler::watch(const std::shared_ptr<HoldState>& state, std::optional<milliseconds> renew_lease,
                      Clock::time_point max_hold_deadline) {
  bool sooner;
  {
    std::lock_guard lock(shared_->mu);
    state->renew_lease = renew_lease;
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
    Clock::time_point first =
        std::min({state->next_renew, max_hold_deadline, state->lock->expires_at()});
    sooner = first < shared_->sleeping_until;
  }
  // Only a hold due before the planned wake-up needs the thread now: most acquires don't
  // cost a context switch.
  if (sooner) shared_->cv.notify_all();
}

void Scheduler::stop_renewing(HoldState& state) {
  // Only makes work later: the thread needs no wake-up.
  std::lock_guard lock(shared_->mu);
  state.renew_lease.reset();
  state.next_renew = Clock::time_point::max();
}

}  // namespace dlock::detail
