#include "acquisition.h"

#include <algorithm>

#include "keys.h"
#include "redis_backend.h"

namespace dlock::redis {

using std::chrono::milliseconds;

namespace {
constexpr milliseconds kDownPoll{25};  // poll while the subscriber is disconnected
}  // namespace

RedisAcquisition::RedisAcquisition(RedisBackend& backend, const spi::AttemptRequest& request,
                                   std::function<void()> wake)
    : backend_(backend), req_(request), wake_(std::move(wake)) {}

RedisAcquisition::~RedisAcquisition() {
  reg_.reset();  // no wake-ups from here on
  // Only a caller that waits can have a queue entry or a grant it did not pick up.
  if (req_.will_wait && tried_ && !granted_) backend_.abandon(req_);
}

spi::Attempt RedisAcquisition::attempt() {
  if (req_.will_wait && !reg_) {
    // A busy lock's channel usually stays subscribed between waits (it lingers): then
    // registering costs no round trip, and done before the attempt it misses nothing, so
    // one attempt is enough.
    const RedisOptions& o = backend_.options();
    auto sub = backend_.existing_subscriber();
    if (sub && sub->subscribed(LockKeys(o.prefix, req_.name, o.db).channel)) register_for_wakeups();
  }
  spi::Attempt a = attempt_once();
  if (req_.will_wait && !reg_ && std::holds_alternative<spi::Busy>(a)) {
    // Pub/sub only delivers what is published after SUBSCRIBE: subscribe now, then look
    // again, so a release between the first attempt and the subscription is seen.
    register_for_wakeups();
    a = attempt_once();
  }
  return a;
}

milliseconds RedisAcquisition::fallback_poll() const noexcept {
  return reg_ ? reg_->fallback_poll() : kDownPoll;
}

spi::Attempt RedisAcquisition::attempt_once() {
  tried_ = true;  // before sending: a lost reply may still have queued us or granted
  Clock::time_point sent;
  // A registered waiter may have been handed the lock (the message only woke it, and may
  // have come before it subscribed): the script recognises its hold and turns the short
  // pick-up lease into its full lease, counted from this request.
  const long long value = backend_.run_acquire(req_, reg_ != nullptr, sent);
  if (value > 0) {
    granted_ = true;
    return backend_.make_held(req_, static_cast<std::uint64_t>(value), sent);
  }
  spi::Busy busy;
  if (value < 0) busy.retry_after = milliseconds(-value);
  return busy;
}

void RedisAcquisition::register_for_wakeups() {
  const RedisOptions& o = backend_.options();
  const LockKeys k(o.prefix, req_.name, o.db);
  // Every waiter holds a queue entry and refreshes it with each attempt: often enough to
  // stay within its heartbeat even if no grant message comes.
  Subscriber::Polls polls{std::max(o.fair_heartbeat / 3, milliseconds(10)), kDownPoll};
  polls.down = std::min(polls.down, polls.healthy);
  reg_ = backend_.subscriber()->add(k.channel, req_.waiter_id, polls, wake_);
}

}  // namespace dlock::redis
