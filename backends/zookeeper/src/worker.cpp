#include "worker.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace dlock::zookeeper {
namespace {

std::atomic<bool> g_gone{false};

class Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  ~Worker() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    g_gone = true;
  }

  void post(std::function<void()> job, Clock::time_point at) {
    {
      std::lock_guard lk(mu_);
      jobs_.emplace(at, std::move(job));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock lk(mu_);
    while (true) {
      if (jobs_.empty()) {
        if (stop_) return;
        cv_.wait(lk);
        continue;
      }
      auto first = jobs_.begin();
      const bool due = first->first <= Clock::now();
      if (!due && !stop_) {
        cv_.wait_until(lk, first->first);
        continue;
      }
      auto job = std::move(first->second);
      jobs_.erase(first);
      // Outside the lock: running a job, and destroying its captures, may post again (the
      // last reference to a session handle posts its close).
      lk.unlock();
      if (due) {  // at exit, delayed retries are dropped; closes (due now) still run
        try {
          job();
        } catch (...) {
          // A job reports through its own channel; nothing may kill the worker.
        }
      }
      job = nullptr;
      lk.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> jobs_;  // guarded by mu_
  bool stop_ = false;                                            // guarded by mu_
  std::thread thread_;
};

Worker& worker() {
  static Worker w;
  return w;
}

}  // namespace

void post(std::function<void()> job, Clock::time_point at) {
  if (g_gone.load()) {
    job();
    return;
  }
  worker().post(std::move(job), at);
}

}  // namespace dlock::zookeeper
