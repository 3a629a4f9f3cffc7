#include "wait_loop.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "dlock/error.h"
#include "dlock/spi/fork_guard.h"
#include "sync.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;

// Woken by the backend's push channel or by cancellation; spurious wake-ups are fine. A
// wait that also watches the backend's descriptor sleeps in ppoll on it and on an eventfd
// that notify() signals.
class Notifier {
 public:
  ~Notifier() {
    if (event_fd_ >= 0) ::close(event_fd_);
  }
  void notify() {
    {
      Lock lock(mu_);
      flag_ = true;
      if (event_fd_ >= 0) {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);  // full counter: already readable
        unread_ = true;
      }
    }
    cv_.notify_one();  // outside the lock, as before: the woken waiter does not block on it
  }
  // Forgets a notification that came after the last wait ended, before the next one starts.
  void clear() {
    Lock lock(mu_);
    flag_ = false;
    if (unread_) drain();
  }
  // Returns when notified, when `fd` (if >= 0) is readable, or at `t`.
  void wait_until(Clock::time_point t, int fd) {
    if (fd >= 0 && poll_until(t, fd)) return;
    Lock lock(mu_);
    while (!flag_ && cv_.wait_until(lock.native(), t) == std::cv_status::no_timeout) {
    }
    flag_ = false;
  }

 private:
  // False if no eventfd could be made (EMFILE…): the caller waits on the condition instead,
  // and the backend's fallback poll bounds how late its answer is read.
  bool poll_until(Clock::time_point t, int fd) {
    int event_fd = -1;
    {
      Lock lock(mu_);
      if (event_fd_ < 0) event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (event_fd_ < 0) return false;
      if (flag_) {
        flag_ = false;
        return true;
      }
      event_fd = event_fd_;
    }
    pollfd fds[2] = {{event_fd, POLLIN, 0}, {fd, POLLIN, 0}};
    const auto left = t - Clock::now();
    if (left > Clock::duration::zero()) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec timeout{};
      timeout.tv_sec = static_cast<time_t>(std::min<long long>(ns / 1'000'000'000, 86'400));
      timeout.tv_nsec = static_cast<long>(ns % 1'000'000'000);
      ::ppoll(fds, 2, &timeout, nullptr);  // EINTR: a spurious wake-up
    }
    Lock lock(mu_);
    if (fds[0].revents & POLLIN) drain();  // only when signalled: one syscall less per wait
    flag_ = false;
    return true;
  }

  void drain() DLOCK_REQUIRES(mu_) {
    std::uint64_t count = 0;
    [[maybe_unused]] ssize_t n = ::read(event_fd_, &count, sizeof count);
    unread_ = false;
  }

  Mutex mu_;
  std::condition_variable cv_;
  bool flag_ DLOCK_GUARDED_BY(mu_) = false;
  int event_fd_ DLOCK_GUARDED_BY(mu_) = -1;  // made on the first wait that polls
  bool unread_ DLOCK_GUARDED_BY(mu_) = false;  // written since last read
};

// The calling thread's notifier: the one its last wait used, unless something else still
// holds it (a backend that keeps a wake-up function) or the process forked since (the child
// would share the parent's eventfd). So a thread's waits share one eventfd: an eventfd2 and
// a close cost 2.4 us a wait on a 2-core VM.
std::shared_ptr<Notifier> notifier_for_this_thread() {
  thread_local std::shared_ptr<Notifier> last;
  thread_local std::uint64_t made_in = 0;
  const std::uint64_t generation = spi::fork_generation();
  if (last && last.use_count() == 1 && made_in == generation) {
    last->clear();
    return last;
  }
  last = std::make_shared<Notifier>();
  made_in = generation;
  return last;
}

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
                                             const std::function<AcquireIds()>& next_ids,
                                             Clock::time_point deadline, std::stop_token cancel) {
  request.will_wait = Clock::now() < deadline;
  request.deadline = deadline;
  auto notifier = notifier_for_this_thread();
  auto wake = [notifier] { notifier->notify(); };
  AcquireIds ids;  // viewed by `request`: outlives every Acquisition (declared before it)
  std::unique_ptr<spi::Acquisition> acquisition;
  // REQUIRES: no Acquisition (the one before, which views the old ids, is destroyed).
  auto begin = [&] {
    ids = next_ids();
    request.owner_key = ids.owner_key;
    request.waiter_id = ids.waiter_id;
    acquisition = backend.begin_acquire(request, wake);
  };
  begin();
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
      if (!acquisition) begin();
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
    notifier->wait_until(std::min(deadline, until), acquisition ? acquisition->wait_fd() : -1);
    if (cancel.stop_requested()) return nullptr;
    if (Clock::now() >= deadline && unavailable) break;  // no last attempt after errors
  }
  if (unavailable) throw *unavailable;  // the server could not be reached until the deadline
  return nullptr;
}

}  // namespace dlock::detail
