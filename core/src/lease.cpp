#include "dlock/lease.h"

#include "dlock/error.h"
#include "hold.h"
#include "lost_signal.h"
#include "provider_core.h"
#include "scheduler.h"

namespace dlock {

namespace detail {
Hold::~Hold() {
  retire(std::move(callbacks));  // a normal release must not run lost callbacks of a dead Lease
  if (firing_lost_signal() && state_->in_taking_process()) {
    // Dropped in a lost callback, maybe on a backend's own thread: the release goes to the
    // watchdog's worker, and so does this reference, which may be the provider's last.
    ProviderCore& core = *state_->core;
    if (!released_) core.give_up_dropped(*this);
    core.dispose(std::move(state_));
    return;
  }
  if (released_) return;
  try {
    state_->core->release(*this);
  } catch (...) {
    // No answer, and nobody can ask again: the core gives the hold up (never re-entered)
    // and releases it again in the background.
    state_->core->give_up_dropped(*this);
  }
}
}  // namespace detail

namespace {
const std::string kEmpty;
}

Lease::Lease() noexcept = default;
Lease::Lease(std::unique_ptr<detail::Hold> hold) noexcept : hold_(std::move(hold)) {}
Lease::Lease(Lease&&) noexcept = default;
Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    hold_.reset();  // ~Hold releases best effort
    hold_ = std::move(other.hold_);
  }
  return *this;
}
Lease::~Lease() = default;

bool Lease::held() const noexcept {
  if (!hold_ || hold_->released()) return false;
  const detail::HoldState& st = *hold_->state();
  // Past the moment the lost signal is due, the lock is not ours to count on even if the
  // watchdog has not run yet (a paused process, a busy machine).
  return !st.lock->lost() && st.in_taking_process() && std::chrono::steady_clock::now() < st.loss_deadline();
}

const std::string& Lease::name() const noexcept { return hold_ ? hold_->state()->lock->name() : kEmpty; }
LockMode Lease::mode() const noexcept { return hold_ ? hold_->mode() : LockMode::exclusive; }
const std::string& Lease::owner() const noexcept { return hold_ ? hold_->state()->owner : kEmpty; }

std::uint64_t Lease::fencing_token() const noexcept {
  return hold_ ? hold_->state()->lock->fencing_token() : 0;
}

std::chrono::milliseconds loss_margin(std::chrono::milliseconds lease) noexcept {
  return detail::loss_margin(lease);
}

std::chrono::steady_clock::time_point Lease::expires_at() const noexcept {
  return hold_ ? hold_->state()->lock->expires_at() : std::chrono::steady_clock::time_point::min();
}

bool Lease::release() {
  if (!hold_) return false;
  bool was_held = hold_->state()->core->release(*hold_);
  detail::retire(std::move(hold_->callbacks));  // one of them may be running: release() in it
  return was_held;
}

void Lease::extend(std::chrono::milliseconds lease) {
  if (!hold_) throw Error(ErrorCode::not_held, "empty lease");
  hold_->state()->core->extend(*hold_, lease);
}

std::stop_token Lease::lost_token() const noexcept {
  return hold_ ? hold_->state()->lock->lost_token() : std::stop_token();
}

void Lease::on_lost(std::function<void()> callback) {
  if (!hold_ || hold_->released()) return;
  // It runs inside request_stop(), which is noexcept: an exception would end the process.
  std::function<void()> contained = [callback = std::move(callback)] {
    try {
      callback();
    } catch (...) {  // the signal has fired for everyone else: nothing to hand it to
    }
  };
  hold_->callbacks.push_back(std::make_unique<std::stop_callback<std::function<void()>>>(
      hold_->state()->lock->lost_token(), std::move(contained)));
}

}  // namespace dlock
