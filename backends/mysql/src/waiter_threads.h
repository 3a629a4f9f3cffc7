// Parked threads for row mode's server-side waits. Connector/C++ is synchronous, so each
// wait needs a thread of its own; starting one per wait was a visible share of a contended
// hand-off, so a finished wait's thread parks and takes the next wait instead.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace dlock::mysql {

// Thread safety: every method may be called concurrently.
class WaiterThreads {
 public:
  // A parked thread exits after `idle_exit` without work.
  explicit WaiterThreads(std::chrono::milliseconds idle_exit = std::chrono::seconds(10));
  // Tells parked threads to exit. Does not wait: a running job finishes on its own (jobs
  // hold what they need), and this may run on one of the threads (the last job's state).
  ~WaiterThreads();
  WaiterThreads(const WaiterThreads&) = delete;
  WaiterThreads& operator=(const WaiterThreads&) = delete;

  // Runs `job` on a parked thread, or on a new one when none is idle. The job is destroyed
  // on that thread before it parks again. Throws std::system_error when no thread starts.
  void run(std::function<void()> job);

  // Called by a job on its thread when all that is left of it is short and never blocks
  // (it is about to hand its result over): the thread counts as parked from now on, so a
  // run() that follows queues to it instead of starting a thread. (Handing the result over
  // wakes the caller, which often runs before this thread parks and asks for the next wait
  // at once: without this, nearly every contended acquire started a thread.) Does nothing
  // off a waiter thread or when called twice.
  static void finishing();

  // Threads parked now (for tests).
  std::size_t idle() const;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;  // each one promised to an idle thread
    std::size_t idle = 0;
    bool closing = false;
  };
  static void thread_main(std::shared_ptr<State> st, std::function<void()> job,
                          std::chrono::milliseconds idle_exit);

  const std::chrono::milliseconds idle_exit_;
  std::shared_ptr<State> st_;
};

}  // namespace dlock::mysql
