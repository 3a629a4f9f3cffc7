#include "provider_core.h"

#include "dlock/duration.h"
#include "dlock/error.h"
#include "lost_signal.h"
#include "owner.h"
#include "scheduler.h"
#include "wait_loop.h"

namespace dlock::detail {

using std::chrono::milliseconds;

namespace {
constexpr std::size_t kMaxOwnerBytes = 256;

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::invalid_argument, what); }

// A hold limit: 1 ms .. kLongestDuration.
void check_duration(const char* what, std::chrono::milliseconds d) {
  if (d.count() <= 0 || d > kLongestDuration) {
    invalid(std::string(what) + " must be > 0 and at most " + format_duration(kLongestDuration));
  }
}

// A lease: kShortestLease .. kLongestDuration.
void check_lease(const std::string& what, std::chrono::milliseconds d) {
  if (d < kShortestLease || d > kLongestDuration) {
    invalid(what + " must be at least " + format_duration(kShortestLease) + " and at most " +
            format_duration(kLongestDuration) + ", got " + std::to_string(d.count()) + "ms");
  }
}

const Capabilities& checked(const Capabilities& caps) {
  check_lease("the default lease (the URI's lease=)", caps.default_lease);
  return caps;
}
}  // namespace

ProviderCore::ProviderCore(std::shared_ptr<spi::Backend> backend)
    : backend_(std::move(backend)),
      caps_(checked(backend_->capabilities())),
      client_id_(random_client_id()),
      scheduler_(backend_) {}

void ProviderCore::validate(std::string_view name, LockMode mode, const AcquireOptions& o) const {
  if (name.empty()) invalid("lock name is empty");
  if (name.size() > caps_.max_name_bytes) {
    invalid("lock name is " + std::to_string(name.size()) + " bytes; this backend takes at most " +
            std::to_string(caps_.max_name_bytes));
  }
  if (o.owner && (o.owner->empty() || o.owner->size() > kMaxOwnerBytes)) {
    invalid("owner id must be 1.." + std::to_string(kMaxOwnerBytes) + " bytes");
  }
  if (o.lease) check_lease("lease", *o.lease);
  if (o.max_hold) check_duration("max_hold", *o.max_hold);
  if (mode == LockMode::shared && !caps_.read_write) {
    throw Error(ErrorCode::unsupported, "this backend has no shared (read) locks");
  }
  if (o.fair && !caps_.fair) throw Error(ErrorCode::unsupported, "this backend has no fair locks");
}

std::optional<Lease> ProviderCore::reenter(const Key& key, LockMode mode, Clock::time_point deadline) {
  Lock lock(mu_);
  while (true) {
    auto it = holds_.find(key);
    if (it == holds_.end()) return std::nullopt;
    auto st = it->second;
    if (st->ended || st->lock->lost() || st->lock->expires_at() <= Clock::now()) {
      // A lost or run-out lock is never re-entered: the next acquire starts afresh (the
      // watchdog may not have told the holder yet).
      holds_.erase(it);
      return std::nullopt;
    }
    if (st->releasing) {
      // Our own last hold is being released on the backend: one round trip at most.
      if (released_.wait_until(lock.native(), deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
        return std::nullopt;
      }
      continue;
    }
    if (mode == LockMode::exclusive && st->lock->mode() == LockMode::shared) {
      throw Error(ErrorCode::would_deadlock,
                  "owner holds a shared (read) lock and asked for exclusive: upgrades are refused; "
                  "release the read lock first");
    }
    ++st->holds;
    return Lease(std::make_unique<Hold>(st, mode));
  }
}

std::optional<Lease> ProviderCore::try_acquire(std::string_view name, LockMode mode, Wait wait,
                                               const AcquireOptions& options) {
  Clock::time_point start = Clock::now();
  // Checked before any of the core's mutexes is taken: a parent thread may have held one at
  // the fork, and the copy stays locked in the child for good.
  if (fork_.in_forked_child()) {
    throw Error(ErrorCode::unsupported,
                "this provider was opened before fork(): its connections, mutexes and watchdog stay with the "
                "parent process; open a new provider in the child (dlock::open)");
  }
  validate(name, mode, options);
  Clock::time_point deadline = wait.deadline_from(start);
  Key key{std::string(name), options.owner ? *options.owner : thread_owner()};

  if (auto lease = reenter(key, mode, deadline)) return lease;
  if (options.cancel.stop_requested()) return std::nullopt;

  // A new sequence number for each Acquisition, also the retries of this call: owner keys
  // and waiter ids are never reused (wait_for_lock).
  const std::string& owner = key.second;
  auto next_ids = [this, &owner] {
    const std::string seq = std::to_string(next_seq_++);
    return AcquireIds{client_id_ + ":" + seq + ":" + owner, client_id_ + ":w" + seq};
  };
  milliseconds lease = options.lease.value_or(caps_.default_lease);
  spi::AttemptRequest request;
  request.name = name;
  request.mode = mode;
  request.lease = lease;
  request.fair = options.fair;

  auto held = wait_for_lock(*backend_, request, next_ids, deadline, options.cancel);
  if (!held) return std::nullopt;
  // Client-enforced lease and max_hold count from the grant, not from the start of a wait.
  Clock::time_point granted = Clock::now();

  auto st = std::make_shared<HoldState>();
  st->core = shared_from_this();
  st->lock = std::move(held);
  st->owner = key.second;
  st->fork_generation = spi::fork_generation();
  st->holds = 1;
  WatchPlan plan;
  plan.max_hold_deadline = options.max_hold ? granted + *options.max_hold : Clock::time_point::max();
  if (caps_.liveness == Liveness::session) {
    // The session is probed every S/3 whatever the lease; an explicit lease is enforced by
    // the client on top of the server's own bound (the earlier of the two ends the hold).
    plan.renew_lease = caps_.default_lease;
    plan.server_margin = loss_margin(caps_.default_lease);
    if (options.lease) st->lock->set_client_expiry(granted + lease);
    plan.client_margin = loss_margin(lease);
  } else {
    if (!options.lease) plan.renew_lease = lease;
    plan.server_margin = loss_margin(lease);
  }
  {
    Lock lock(mu_);
    holds_[key] = st;  // replaces a lost or released entry of the same owner
  }
  scheduler_.watch(st, plan);
  // A loss the backend reports (session expired, connection dropped) wakes the watchdog,
  // which gives the hold up and releases it on the backend.
  st->on_backend_loss = std::make_unique<std::stop_callback<std::function<void()>>>(
      st->lock->lost_token(), std::function<void()>([this] { scheduler_.poke(); }));
  return Lease(std::make_unique<Hold>(st, mode));
}

bool ProviderCore::release(Hold& hold) {
  auto& st = *hold.state();
  if (!st.in_taking_process()) {
    // A forked child's copy of its parent's lease: the parent holds the lock. Touches
    // nothing shared (a mutex may have been locked at fork time, the threads are gone).
    hold.set_released();
    return false;
  }
  {
    Lock lock(mu_);
    if (hold.released()) return false;
    if (st.ended || st.lock->lost()) {
      hold.set_released();
      if (--st.holds > 0) return false;
      forget_locked(st);
      // The holder is done with a lost lock: make the server forget it now rather than at
      // the end of its lease (a process that exits next would leave it to the server).
      bool release_now = !st.ended;  // lost by the backend, not yet given up
      st.ended = true;
      lock.unlock();
      if (!release_now) release_now = scheduler_.take_pending_release(st);
      if (release_now) {
        // In a lost callback (maybe on the backend's own thread, which the release's
        // answer may need) the worker releases it.
        if (firing_lost_signal()) {
          scheduler_.release_dropped(hold.state());
        } else {
          release_given_up(st);
        }
      }
      return false;
    }
    if (st.holds > 1) {
      hold.set_released();
      --st.holds;
      return true;
    }
    st.releasing = true;
  }
  bool was_held = false;
  try {
    was_held = backend_->release(*st.lock);
  } catch (...) {
    Lock lock(mu_);
    st.releasing = false;
    released_.notify_all();
    throw;  // the hold stays; release() may be called again
  }
  {
    Lock lock(mu_);
    hold.set_released();
    st.holds = 0;
    st.releasing = false;
    st.ended = true;
    forget_locked(st);
  }
  released_.notify_all();
  if (!was_held) st.lock->mark_lost();
  return was_held;
}

void ProviderCore::forget_locked(const HoldState& st) {
  auto it = holds_.find({st.lock->name(), st.owner});
  if (it != holds_.end() && it->second.get() == &st) holds_.erase(it);
}

void ProviderCore::extend(Hold& hold, milliseconds lease) {
  check_lease("lease", lease);
  auto& st = *hold.state();
  if (!st.in_taking_process()) {
    throw Error(ErrorCode::not_held, "lease of '" + st.lock->name() +
                                         "' was taken by the parent process: a forked child does not hold it");
  }
  {
    Lock lock(mu_);
    if (hold.released() || st.ended || st.lock->lost()) {
      throw Error(ErrorCode::not_held, "lease of '" + st.lock->name() + "' is no longer held");
    }
  }
  Clock::time_point sent = Clock::now();
  spi::HeldLock* locks[] = {st.lock.get()};
  spi::RenewStatus status[] = {spi::RenewStatus::failed};
  const bool session = caps_.liveness == Liveness::session;
  // A session backend probes its session (its bound S is not the caller's to change); the
  // new lease is enforced by the client on top of it.
  backend_->extend_many(locks, session ? caps_.default_lease : lease, status);
  switch (status[0]) {
    case spi::RenewStatus::renewed:
      if (session) {
        st.lock->set_client_expiry(sent + lease);
        scheduler_.set_client_lease(st, lease);
      } else {
        scheduler_.stop_renewing(st, lease);
      }
      return;
    case spi::RenewStatus::not_held:
      st.lock->set_server_expiry(Clock::now());  // gone: someone else may hold it now
      give_up(hold.state(), Clock::now());
      throw Error(ErrorCode::not_held, "lease of '" + st.lock->name() + "' is no longer held");
    case spi::RenewStatus::failed:
      break;
  }
  throw Error(ErrorCode::unavailable, "could not extend the lease of '" + st.lock->name() +
                                          "': the backend did not answer");
}

bool ProviderCore::give_up(const std::shared_ptr<HoldState>& state, Clock::time_point release_at) noexcept {
  {
    Lock lock(mu_);
    if (state->ended) return false;
    state->ended = true;
  }
  // Plan the release before the lost signal fires: a holder that reacts to the signal by
  // dropping its Lease must find it pending, to run it at once (release()). The planned
  // release still cannot free the lock before the signal fires: only the scheduler's worker
  // runs it, queued by the timekeeper, and a give-up on either of those threads fires the
  // signal before it returns. (A give-up from extend() on a caller's thread follows a
  // not_held answer: the lock is gone already.)
  scheduler_.release_given_up_at(state, release_at);
  state->lock->mark_lost();
  return true;
}

void ProviderCore::give_up_dropped(Hold& hold) noexcept {
  std::shared_ptr<HoldState> st = hold.state();
  bool given_up_before = false;
  {
    Lock lock(mu_);
    if (hold.released()) return;
    hold.set_released();
    if (--st->holds > 0) return;  // (the backend is only ever asked for the last hold)
    forget_locked(*st);
    given_up_before = st->ended;
    st->ended = true;
  }
  // Given up by the watchdog meanwhile: its planned release is taken over here (the state
  // dies with this Hold, and the watchdog keeps no state alive).
  if (given_up_before && !scheduler_.take_pending_release(*st)) return;
  scheduler_.release_dropped(std::move(st));
}

void ProviderCore::dispose(std::shared_ptr<const void> reference) noexcept {
  scheduler_.dispose(std::move(reference));
}

void ProviderCore::release_given_up(HoldState& state) noexcept {
  try {
    backend_->release(*state.lock);  // owner-checked: never touches another holder
  } catch (const Error& e) {
    // No answer (a stalled or paused server): tried again until the lock ends on its own,
    // so that it does not stay on the server for the rest of its lease with nobody to
    // release it. Other failures: the lease expires or the session ends on its own.
    if (e.code() != ErrorCode::unavailable) return;
    try {
      scheduler_.retry_release(state.lock);
    } catch (...) {
      // (Out of memory: as before, the lock ends on its own.)
    }
  } catch (...) {
  }
}

}  // namespace dlock::detail
