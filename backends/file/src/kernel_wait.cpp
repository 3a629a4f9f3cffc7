#include "kernel_wait.h"

#include "range_lock.h"

namespace dlock::file {
namespace {

// The thread only blocks in one system call and calls `wake`: a small stack is plenty.
constexpr std::size_t kStack = 128 * 1024;

}  // namespace

std::unique_ptr<KernelWait> KernelWait::start(int fd, LockMode mode,
                                              const std::function<void()>& wake) {
  std::unique_ptr<KernelWait> w(new KernelWait(fd, mode, wake));
  pthread_attr_t attr;
  if (::pthread_attr_init(&attr) != 0) return nullptr;
  ::pthread_attr_setstacksize(&attr, kStack);
  int rc = ::pthread_create(&w->thread_, &attr, &KernelWait::run, w.get());
  ::pthread_attr_destroy(&attr);
  if (rc != 0) return nullptr;  // EAGAIN: too many threads
  return w;
}

KernelWait::~KernelWait() {
  // Cancelling a thread that already finished (but is not joined) is harmless; a cancel that
  // arrives after its wait returned stays pending and is never acted upon (cancellation is
  // disabled from then on).
  if (state() == State::waiting) ::pthread_cancel(thread_);
  ::pthread_join(thread_, nullptr);
}

void* KernelWait::run(void* self) {
  int unused = 0;
  ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &unused);
  static_cast<KernelWait*>(self)->wait_and_wake();
  return nullptr;
}

void KernelWait::wait_and_wake() {
  // In the queue first (shared with the other waiters; only a writer's first try, which
  // never waits, holds it exclusively, for an instant): from now on no such try succeeds,
  // so a releaser coming straight back cannot take the lock past us.
  int err = wait_lock_ranges(fd_, Range::queue, 1, RangeMode::shared);
  if (mode_ == LockMode::exclusive) {
    if (err == 0) err = wait_lock_ranges(fd_, Range::gate, 1, RangeMode::exclusive);
    if (err == 0) err = wait_lock_ranges(fd_, Range::main, 1, RangeMode::exclusive);
    // A writer holds gate and main, as after a first try that succeeded.
  } else {
    if (err == 0) err = wait_lock_ranges(fd_, Range::gate, 2, RangeMode::shared);
    if (err == 0) unlock_range(fd_, Range::gate);  // a reader holds main alone
  }
  if (err == 0) unlock_range(fd_, Range::queue);
  error_ = err;
  state_.store(err == 0 ? State::locked : State::failed, std::memory_order_release);
  try {
    wake_();  // cancellation is disabled here: no forced unwind can pass through this
  } catch (...) {
    // The core's wake does not throw; if it did, the core still polls.
  }
}

}  // namespace dlock::file
