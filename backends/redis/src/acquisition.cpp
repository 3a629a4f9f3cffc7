#include "acquisition.h"

#include <algorithm>

#include "keys.h"
#include "redis_backend.h"

namespace dlock::redis {

using std::chrono::milliseconds;

namespace {
constexpr milliseconds kDownPoll{25};  // poll while no blocking wait is on
}  // namespace

RedisAcquisition::RedisAcquisition(RedisBackend& backend, const spi::AttemptRequest& request,
                                   std::function<void()> /*wake: wait_fd() instead*/)
    : backend_(backend), req_(request) {}

RedisAcquisition::~RedisAcquisition() {
  stop_wait();  // no wake-ups from here on
  if (granted_) return;
  // A caller that waits may have a queue entry or a grant it did not take; any caller may
  // have a grant made by a request whose reply was lost (it may even run later: the server
  // stalled). Either is undone, owner-checked: nobody else holds this owner key.
  if (lost_ || (req_.will_wait && tried_)) backend_.abandon(req_, lost_, silent_pending_);
}

void RedisAcquisition::stop_wait() noexcept {
  if (!wait_) return;
  if (wait_->answered()) silent_pending_ = false;
  if (auto idle = wait_->take_idle_connection()) backend_.keep_wait_connection(std::move(idle));
  wait_.reset();  // a connection still in its BLPOP is closed, which ends the BLPOP
}

int RedisAcquisition::wait_fd() const noexcept { return wait_ ? wait_->fd() : -1; }

spi::Attempt RedisAcquisition::attempt() {
  if (wait_) {
    const GrantWait::Result r = wait_->poll();
    if (r.state == GrantWait::State::granted) {
      stop_wait();
      // The pick-up made the lease full after the request left. A grant that came late in
      // a long wait leaves too little of that estimate: pick it up again below (the
      // acquire script renews it from now).
      auto held = backend_.make_held(req_, r.token, r.sent);
      if (held->server_expiry() - Clock::now() >= req_.lease * 3 / 4) {
        granted_ = true;
        return held;
      }
    } else if (r.state == GrantWait::State::failed) {
      stop_wait();  // the attempt below finds a grant it left, and a new wait starts
    }
  }
  // A contended name: queue and block in one write, with no reply until the grant.
  if (!tried_ && req_.will_wait && backend_.queues_at_once(req_.name)) {
    const std::exception_ptr failed = start_wait(true);
    if (!failed) return spi::Busy{};
    // Opening its connection used up the wait (a stalled server: one command timeout
    // already): no new request after the deadline.
    if (Clock::now() >= req_.deadline) std::rethrow_exception(failed);
  }
  const bool first = !tried_;
  spi::Attempt a = attempt_once();
  if (req_.will_wait && !wait_ && std::holds_alternative<spi::Busy>(a)) {
    if (first) backend_.note_busy(req_.name);
    queued_ = true;
    start_wait(false);  // if it fails, the attempts poll (fallback_poll) until one opens
  }
  return a;
}

std::exception_ptr RedisAcquisition::start_wait(bool with_attempt) noexcept {
  const RedisOptions& o = backend_.options();
  try {
    const LockKeys k(o.prefix, req_.name);
    std::function<void(Connection&)> attempt;
    if (with_attempt) attempt = [this, &k](Connection& c) { backend_.append_silent_acquire(c, req_, k); };
    std::unique_ptr<Connection> conn = backend_.wait_connection();  // nothing sent yet
    // Before sending: the attempt may have queued us or granted even if sending fails, so
    // the next attempts look for our hold and the give-up abandons. (Not before: a give-up
    // after a connection that could not be opened has nothing to undo, and must not wait on
    // the server that did not answer it.)
    tried_ = true;
    if (with_attempt) queued_ = silent_pending_ = true;
    wait_ = std::make_unique<GrantWait>(std::move(conn), *backend_.scripts_, k.hold, k.grants(req_.waiter_id),
                                        req_.owner_key, req_.lease, o.fair_heartbeat, attempt);
    return nullptr;
  } catch (...) {
    return std::current_exception();  // no dedicated connection now
  }
}

milliseconds RedisAcquisition::fallback_poll() const noexcept {
  if (!wait_) return kDownPoll;
  // Every waiter holds a queue entry and refreshes it with each attempt: often enough to
  // stay within its heartbeat.
  return std::max(backend_.options().fair_heartbeat / 3, milliseconds(10));
}

spi::Attempt RedisAcquisition::attempt_once() {
  tried_ = true;  // before sending: a lost reply may still have queued us or granted
  Clock::time_point sent;
  // A queued waiter may have been handed the lock (its BLPOP not answered yet, or failed):
  // the script recognises its hold and turns the short pick-up lease into its full lease,
  // counted from this request.
  // So may a request whose reply was lost, run before this one.
  const long long value = backend_.run_acquire(req_, queued_ || lost_, sent, lost_);
  if (value > 0) {
    granted_ = true;
    stop_wait();
    return backend_.make_held(req_, static_cast<std::uint64_t>(value), sent);
  }
  spi::Busy busy;
  if (value < 0) busy.retry_after = milliseconds(-value);
  return busy;
}

}  // namespace dlock::redis
