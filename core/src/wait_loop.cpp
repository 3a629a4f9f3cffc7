#include "wait_loop.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "dlock/error.h"
#include "sync.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;

// Woken by the backend's push channel or by cancellation; spurious wake-ups are fine.
class Notifier {
 public:
  void notify() {
    {
      Lock lock(mu_);
      flag_ = true;
    }
    cv_.notify_one();
  }
  void wait_until(Clock::time_point t) {
    Lock lock(mu_);
    while (!flag_ && cv_.wait_until(lock.native(), t) == std::cv_status::no_timeout) {
    }
    flag_ = false;
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  bool flag_ DLOCK_GUARDED_BY(mu_) = false;
};

constexpr milliseconds kForever{std::chrono::hours(24)};
// After an unavailable attempt: 10, 20, 40 … ms up to half a second between retries.
constexpr milliseconds kFirstRetry{10};
constexpr milliseconds kMaxRetry{500};

std::shared_ptr<spi::HeldLock> granted(spi::Attempt& a) {
  auto* lock = std::get_if<std::shared_ptr<spi::HeldLock>>(&a);
  return lock ? std::move(*lock) : nullptr;
}

Clock::time_point after(Clock::time_point now, milliseconds d) {
  return d >= kForever ? Clock::time_point::max() : now + d;  // never overflow
}

}  // namespace

std::shared_ptr<spi::HeldLock> wait_for_lock(spi::Backend& backend, spi::AttemptRequest request,
                                             Clock::time_point deadline, std::stop_token cancel) {
  request.will_wait = Clock::now() < deadline;
  auto notifier = std::make_shared<Notifier>();
  auto wake = [notifier] { notifier->notify(); };
  std::unique_ptr<spi::Acquisition> acquisition = backend.begin_acquire(request, wake);
  if (!request.will_wait) {
    spi::Attempt attempt = acquisition->attempt();
    return granted(attempt);  // a try-once Busy leaves nothing behind
  }

  std::stop_callback on_cancel(cancel, wake);
  std::optional<Error> unavailable;  // the last attempt failed with it
  milliseconds retry = kFirstRetry;
  while (true) {
    Clock::time_point until = Clock::time_point::max();
    try {
      if (!acquisition) acquisition = backend.begin_acquire(request, wake);
      spi::Attempt attempt = acquisition->attempt();
      if (auto lock = granted(attempt)) return lock;
      unavailable.reset();
      retry = kFirstRetry;
      milliseconds sleep = acquisition->fallback_poll();
      if (auto& hint = std::get<spi::Busy>(attempt).retry_after) {
        sleep = std::min(sleep, std::max(*hint, milliseconds(1)));
      }
      until = after(Clock::now(), sleep);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::unavailable) throw;  // the acquisition abandons on unwinding
      // A transient failure while waiting (a stalled or restarting server): start afresh
      // after a backoff, until the deadline.
      unavailable = e;
      acquisition.reset();
      until = Clock::now() + retry;
      retry = std::min(retry * 2, kMaxRetry);
    }
    if (cancel.stop_requested()) return nullptr;
    if (Clock::now() >= deadline) break;
    notifier->wait_until(std::min(deadline, until));
    if (cancel.stop_requested()) return nullptr;
    if (Clock::now() >= deadline && unavailable) break;  // no last attempt after errors
  }
  if (unavailable) throw *unavailable;  // the server could not be reached until the deadline
  return nullptr;
}

}  // namespace dlock::detail
