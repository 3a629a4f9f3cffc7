#include "waiter_threads.h"

#include <thread>

namespace dlock::mysql {
namespace {
// The running job's pool state and whether it announced its end (finishing()).
thread_local void* current_state = nullptr;
thread_local bool announced = false;
}  // namespace

WaiterThreads::WaiterThreads(std::chrono::milliseconds idle_exit)
    : idle_exit_(idle_exit), st_(std::make_shared<State>()) {}

WaiterThreads::~WaiterThreads() {
  {
    std::lock_guard lock(st_->mu);
    st_->closing = true;
  }
  st_->cv.notify_all();
}

void WaiterThreads::run(std::function<void()> job) {
  {
    std::lock_guard lock(st_->mu);
    if (st_->idle > st_->jobs.size()) {
      st_->jobs.push_back(std::move(job));
      st_->cv.notify_one();
      return;
    }
  }
  std::thread(thread_main, st_, std::move(job), idle_exit_).detach();
}

void WaiterThreads::finishing() {
  auto* st = static_cast<State*>(current_state);
  if (st == nullptr || announced) return;
  std::lock_guard lock(st->mu);
  ++st->idle;
  announced = true;
}

std::size_t WaiterThreads::idle() const {
  std::lock_guard lock(st_->mu);
  return st_->idle - st_->jobs.size();
}

void WaiterThreads::thread_main(std::shared_ptr<State> st, std::function<void()> job,
                                std::chrono::milliseconds idle_exit) {
  current_state = st.get();
  for (;;) {
    job();
    // Destroyed before parking, outside the lock: it may hold the last reference to the
    // backend state that owns this WaiterThreads (whose destructor takes the lock).
    job = nullptr;
    std::unique_lock lock(st->mu);
    if (!announced) ++st->idle;
    announced = false;
    st->cv.wait_for(lock, idle_exit, [&] { return st->closing || !st->jobs.empty(); });
    --st->idle;
    if (st->jobs.empty()) return;  // closing, or idle for idle_exit
    job = std::move(st->jobs.front());
    st->jobs.pop_front();
  }
}

}  // namespace dlock::mysql
