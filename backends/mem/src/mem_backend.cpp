#include "mem_backend.h"

#include <algorithm>
#include <vector>

namespace dlock::mem {
namespace {

using std::chrono::milliseconds;

// A waiting writer or fair waiter that stops attempting for this long is purged.
constexpr milliseconds kHeartbeat{2000};
// Waiters attempt at least this often, refreshing their heartbeat (≤ kHeartbeat / 3).
constexpr milliseconds kFallbackPoll{500};

// Drops expired holds and waiters that stopped attempting. An expired hold whose holder has
// not been told yet goes to `untold`: the caller fires its lost signal before any grant.
void purge(Entry& e, Clock::time_point now, std::vector<std::shared_ptr<spi::HeldLock>>& untold) {
  auto tell = [&](const std::weak_ptr<spi::HeldLock>& hold) {
    if (auto lock = hold.lock(); lock && !lock->lost()) untold.push_back(std::move(lock));
  };
  if (!e.writer.empty() && e.writer_expiry <= now) {
    tell(e.writer_lock);
    e.writer.clear();
    e.writer_lock.reset();
  }
  std::erase_if(e.readers, [&](const auto& r) {
    if (r.second.expiry > now) return false;
    tell(r.second.lock);
    return true;
  });
  std::erase_if(e.waiting_writers, [&](const auto& w) { return w.second <= now; });
  std::erase_if(e.fair_queue, [&](const auto& w) { return w.second <= now; });
}

// Fair waiters queue in arrival order; only the head may take the lock.
bool fair_turn(Entry& e, const spi::AttemptRequest& r, Clock::time_point now) {
  auto me = std::find_if(e.fair_queue.begin(), e.fair_queue.end(),
                         [&](const auto& w) { return w.first == r.waiter_id; });
  if (me != e.fair_queue.end()) {
    me->second = now + kHeartbeat;
  } else if (r.will_wait) {
    e.fair_queue.emplace_back(std::string(r.waiter_id), now + kHeartbeat);
    me = std::prev(e.fair_queue.end());
  }
  return e.fair_queue.empty() || me == e.fair_queue.begin();
}

milliseconds remaining(Clock::time_point t, Clock::time_point now) {
  return std::chrono::ceil<milliseconds>(t - now);
}

}  // namespace

MemBackend::MemBackend(std::shared_ptr<Space> space, milliseconds default_lease)
    : space_(std::move(space)) {
  caps_.reentrant = true;
  caps_.read_write = true;
  caps_.fair = true;
  caps_.fencing = true;
  caps_.push_wakeup = true;
  caps_.liveness = Liveness::lease;
  caps_.max_name_bytes = 4096;
  caps_.default_lease = default_lease;
  // A broken lock is noticed at the next renewal: a third of the lease plus batching slack.
  caps_.lost_signal_bound = default_lease / 3 + default_lease / 12 + milliseconds(100);
  caps_.crash_release_bound = default_lease;
}

spi::Attempt MemBackend::attempt(const spi::AttemptRequest& r) {
  // In process, the order can be strict where a server's can only rest on the lost signal's
  // margin: an expired holder is told before anyone can be granted its name, however late
  // its own watchdog runs. The signal's callbacks run outside the mutex (they may call dlock).
  for (;;) {
    std::vector<std::shared_ptr<spi::HeldLock>> untold;
    {
      Clock::time_point now = Clock::now();
      std::lock_guard lock(space_->mu);
      Entry& e = space_->entries[std::string(r.name)];
      purge(e, now, untold);
      if (untold.empty()) return attempt_locked(e, r, now);
      ++e.telling;
    }
    for (auto& held : untold) held->mark_lost();
    std::lock_guard lock(space_->mu);
    Entry& e = space_->entries[std::string(r.name)];
    --e.telling;
    Space::wake_all(e);  // attempts refused meanwhile
  }
}

spi::Attempt MemBackend::attempt_locked(Entry& e, const spi::AttemptRequest& r, Clock::time_point now) {
  bool turn = !r.fair || fair_turn(e, r, now);
  bool is_writer = r.mode == LockMode::exclusive;
  // Writer preference: a waiting writer keeps new readers out. A fair reader whose turn it is
  // heads the queue, so every fair writer waiting is behind it and must not keep it out
  // (each would wait for the other); only writers outside the queue still do.
  auto keeps_reader_out = [&](const auto& w) {
    if (w.first == r.waiter_id) return false;
    return !(r.fair && turn &&
             std::any_of(e.fair_queue.begin(), e.fair_queue.end(),
                         [&](const auto& q) { return q.first == w.first; }));
  };
  bool free = e.telling == 0 && e.writer.empty() &&
              (is_writer ? e.readers.empty() : std::none_of(e.waiting_writers.begin(), e.waiting_writers.end(),
                                                            keeps_reader_out));
  if (turn && free) {
    Clock::time_point expiry = now + r.lease;
    auto held = std::make_shared<spi::HeldLock>(std::string(r.name), r.mode, std::string(r.owner_key),
                                                ++space_->fence, expiry);
    if (is_writer) {
      e.writer = r.owner_key;
      e.writer_expiry = expiry;
      e.writer_lock = held;
    } else {
      e.readers[std::string(r.owner_key)] = ReaderHold{expiry, held};
    }
    e.waiting_writers.erase(std::string(r.waiter_id));
    if (std::erase_if(e.fair_queue, [&](const auto& w) { return w.first == r.waiter_id; }) > 0) {
      Space::wake_all(e);  // a new head: a reader behind a reader may share the lock now
    }
    return held;
  }
  if (is_writer && r.will_wait) e.waiting_writers[std::string(r.waiter_id)] = now + kHeartbeat;
  spi::Busy busy;
  if (!e.writer.empty()) {
    busy.retry_after = remaining(e.writer_expiry, now);
  } else if (!e.readers.empty()) {
    auto first = std::min_element(e.readers.begin(), e.readers.end(),
                                  [](const auto& a, const auto& b) { return a.second.expiry < b.second.expiry; });
    busy.retry_after = remaining(first->second.expiry, now);
  }
  return busy;
}

// One acquire call: registers for wake-ups at its first Busy and removes what it left when
// it is given up.
class MemAcquisition final : public spi::Acquisition {
 public:
  MemAcquisition(MemBackend& backend, const spi::AttemptRequest& request, std::function<void()> wake)
      : backend_(backend), request_(request), wake_(std::move(wake)) {}
  ~MemAcquisition() override {
    if (!granted_ && request_.will_wait) {
      backend_.abandon(request_, waker_);
    } else if (waker_) {
      backend_.remove_waker(request_.name, *waker_);  // a waiter that was granted
    }
  }

  spi::Attempt attempt() override {
    spi::Attempt a = backend_.attempt(request_);
    if (std::holds_alternative<spi::Busy>(a) && request_.will_wait && !waker_) {
      // Registered after the busy answer: attempt once more so no release is missed.
      waker_ = backend_.add_waker(request_.name, wake_);
      a = backend_.attempt(request_);
    }
    granted_ = std::holds_alternative<std::shared_ptr<spi::HeldLock>>(a);
    return a;
  }
  milliseconds fallback_poll() const noexcept override { return kFallbackPoll; }

 private:
  MemBackend& backend_;
  const spi::AttemptRequest& request_;
  std::function<void()> wake_;
  std::optional<std::uint64_t> waker_;
  bool granted_ = false;
};

std::unique_ptr<spi::Acquisition> MemBackend::begin_acquire(const spi::AttemptRequest& request,
                                                            std::function<void()> wake) {
  return std::make_unique<MemAcquisition>(*this, request, std::move(wake));
}

std::uint64_t MemBackend::add_waker(std::string_view name, std::function<void()> wake) {
  std::lock_guard lock(space_->mu);
  std::uint64_t id = space_->next_waker++;
  space_->entries[std::string(name)].wakers.emplace(id, std::move(wake));
  return id;
}

void MemBackend::remove_waker(std::string_view name, std::uint64_t waker) noexcept {
  std::lock_guard lock(space_->mu);
  auto it = space_->entries.find(std::string(name));
  if (it == space_->entries.end()) return;
  it->second.wakers.erase(waker);
  space_->erase_if_idle(it);
}

void MemBackend::abandon(const spi::AttemptRequest& r, std::optional<std::uint64_t> waker) noexcept {
  std::lock_guard lock(space_->mu);
  auto it = space_->entries.find(std::string(r.name));
  if (it == space_->entries.end()) return;
  Entry& e = it->second;
  if (waker) e.wakers.erase(*waker);
  bool was_blocking = e.waiting_writers.erase(std::string(r.waiter_id)) > 0 ||
                      (!e.fair_queue.empty() && e.fair_queue.front().first == r.waiter_id);
  std::erase_if(e.fair_queue, [&](const auto& w) { return w.first == r.waiter_id; });
  if (was_blocking) Space::wake_all(e);
  space_->erase_if_idle(it);
}

bool MemBackend::release(spi::HeldLock& lock) {
  Clock::time_point now = Clock::now();
  std::lock_guard guard(space_->mu);
  auto it = space_->entries.find(lock.name());
  if (it == space_->entries.end()) return false;
  Entry& e = it->second;
  bool held = false;
  if (lock.mode() == LockMode::exclusive) {
    held = e.writer == lock.owner_key() && e.writer_expiry > now;
    if (e.writer == lock.owner_key()) {
      e.writer.clear();
      e.writer_lock.reset();
    }
  } else {
    auto r = e.readers.find(lock.owner_key());
    held = r != e.readers.end() && r->second.expiry > now;
    if (r != e.readers.end()) e.readers.erase(r);
  }
  if (held) Space::wake_all(e);
  space_->erase_if_idle(it);
  return held;
}

void MemBackend::extend_many(std::span<spi::HeldLock* const> locks, milliseconds lease,
                             std::span<spi::RenewStatus> out) noexcept {
  Clock::time_point now = Clock::now();
  std::lock_guard guard(space_->mu);
  for (std::size_t i = 0; i < locks.size(); ++i) {
    spi::HeldLock& l = *locks[i];
    out[i] = spi::RenewStatus::not_held;
    auto it = space_->entries.find(l.name());
    if (it == space_->entries.end()) continue;
    Entry& e = it->second;
    Clock::time_point* expiry = nullptr;
    if (l.mode() == LockMode::exclusive) {
      if (e.writer == l.owner_key()) expiry = &e.writer_expiry;
    } else if (auto r = e.readers.find(l.owner_key()); r != e.readers.end()) {
      expiry = &r->second.expiry;
    }
    if (!expiry || *expiry <= now) continue;
    *expiry = now + lease;
    l.set_server_expiry(now + lease);
    out[i] = spi::RenewStatus::renewed;
  }
}

}  // namespace dlock::mem
