// The shared lock table of one mem:// space. Private to the mem backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace dlock::mem {

using Clock = std::chrono::steady_clock;

// One name's state. Expired holds are free (purged lazily); the fencing counter outlives
// every hold so tokens keep increasing.
struct Entry {
  std::string writer;  // owner_key of the exclusive holder, empty if none
  Clock::time_point writer_expiry{};
  std::map<std::string, Clock::time_point> readers;          // owner_key → expiry
  std::map<std::string, Clock::time_point> waiting_writers;  // waiter_id → heartbeat deadline
  std::deque<std::pair<std::string, Clock::time_point>> fair_queue;  // waiter_id, heartbeat
  std::uint64_t fence = 0;
  std::map<std::uint64_t, std::function<void()>> wakers;  // registration id → wake
};

struct Space {
  std::mutex mu;
  std::unordered_map<std::string, Entry> entries;  // guarded by mu
  std::uint64_t next_waker = 1;                    // guarded by mu

  // REQUIRES: mu held. Wakes every waiter of `e` (they re-check; spurious wake-ups are fine).
  static void wake_all(Entry& e) {
    for (auto& [id, wake] : e.wakers) wake();
  }
};

// The process-wide space named `name`, created on first use.
std::shared_ptr<Space> space(const std::string& name);

}  // namespace dlock::mem
