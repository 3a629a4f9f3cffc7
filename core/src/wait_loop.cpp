#include "wait_loop.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;

// Woken by the backend's push channel or by cancellation; spurious wake-ups are fine.
class Notifier {
 public:
  void notify() {
    {
      std::lock_guard lock(mu_);
      flag_ = true;
    }
    cv_.notify_one();
  }
  void wait_until(Clock::time_point t) {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, t, [&] { return flag_; });
    flag_ = false;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool flag_ = false;
};

// Without a push channel: 1, 2, 4 … ms up to 50 ms between attempts.
constexpr milliseconds kMaxPoll{50};
constexpr milliseconds kForever{std::chrono::hours(24)};

std::shared_ptr<spi::HeldLock> granted(spi::Attempt& a) {
  auto* lock = std::get_if<std::shared_ptr<spi::HeldLock>>(&a);
  return lock ? std::move(*lock) : nullptr;
}

}  // namespace

std::shared_ptr<spi::HeldLock> wait_for_lock(spi::Backend& backend, spi::AttemptRequest request,
                                             Clock::time_point deadline, std::stop_token cancel) {
  request.will_wait = Clock::now() < deadline;
  spi::Attempt attempt = backend.try_acquire(request);
  if (auto lock = granted(attempt)) return lock;
  if (!request.will_wait) return nullptr;

  auto notifier = std::make_shared<Notifier>();
  std::unique_ptr<spi::WaitRegistration> registration;
  milliseconds poll{1};
  try {
    std::stop_callback on_cancel(cancel, [notifier] { notifier->notify(); });
    registration = backend.prepare_wait(request, [notifier] { notifier->notify(); });
    while (true) {
      attempt = backend.try_acquire(request);
      if (auto lock = granted(attempt)) return lock;
      Clock::time_point now = Clock::now();
      if (cancel.stop_requested() || now >= deadline) break;
      milliseconds sleep = registration ? registration->fallback_poll() : poll;
      if (!registration) poll = std::min(poll * 2, kMaxPoll);
      if (auto& hint = std::get<spi::Busy>(attempt).retry_after) {
        sleep = std::min(sleep, std::max(*hint, milliseconds(1)));
      }
      // A push channel may allow "sleep until woken": keep the sum from overflowing.
      Clock::time_point until = sleep >= kForever ? Clock::time_point::max() : now + sleep;
      notifier->wait_until(std::min(deadline, until));
    }
  } catch (...) {
    registration.reset();
    backend.abandon(request);
    throw;
  }
  registration.reset();
  backend.abandon(request);
  return nullptr;
}

}  // namespace dlock::detail
