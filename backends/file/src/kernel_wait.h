// KernelWait: one waiter blocked in the kernel (F_OFD_SETLKW) on its own thread.
//
// The kernel queues blocked lock requests and wakes them when the ranges they wait for are
// unlocked, also when a holder dies (its descriptors close). So a waiter that blocks there
// needs no event from the holder and cannot miss one: the lock is taken in the kernel the
// moment it is free, and the acquire's thread is woken only then. What the core must be able
// to do at any time (give up at a deadline, on cancellation) is done by cancelling the
// blocked thread (pthread_cancel: F_OFD_SETLKW is a cancellation point in glibc, and
// cancellation is enabled only around that call), then unlocking what the thread took,
// including a grant that raced with the give-up, before closing the descriptor.
//
// What it takes: the queue byte (shared), which keeps the first try of writers from
// taking the lock past the waiters. Then, as a writer: the gate (exclusively: new readers
// stay out while it waits), then main, keeping both. As a reader: gate and main together,
// shared, in one request (so it never holds the gate while it waits), then it drops the
// gate. Last, it leaves the queue.
#pragma once

#include <pthread.h>

#include <atomic>
#include <functional>
#include <memory>

#include "dlock/options.h"

namespace dlock::file {

class KernelWait {
 public:
  enum class State { waiting, locked, failed };

  // Starts the thread blocking on `fd` for `mode`; it calls `wake` once it is done (locked
  // or failed). `fd` and `wake` must outlive this object. Returns nullptr when no thread
  // can be started (the caller then polls).
  static std::unique_ptr<KernelWait> start(int fd, LockMode mode, const std::function<void()>& wake);

  // Cancels the thread if it still waits and joins it. The caller then unlocks what the
  // thread took (closing the descriptor is not enough: a forked child may share its open
  // file description). Never throws.
  ~KernelWait();
  KernelWait(const KernelWait&) = delete;
  KernelWait& operator=(const KernelWait&) = delete;

  State state() const noexcept { return state_.load(std::memory_order_acquire); }
  // The errno of the failed request (state() == failed).
  int error() const noexcept { return error_; }

 private:
  KernelWait(int fd, LockMode mode, const std::function<void()>& wake)
      : fd_(fd), mode_(mode), wake_(wake) {}
  static void* run(void* self);
  void wait_and_wake();

  const int fd_;
  const LockMode mode_;
  const std::function<void()>& wake_;
  int error_ = 0;  // written before state_ is released
  std::atomic<State> state_{State::waiting};
  pthread_t thread_{};
};

}  // namespace dlock::file
