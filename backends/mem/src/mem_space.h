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

#include "dlock/spi/held_lock.h"

namespace dlock::mem {

using Clock = std::chrono::steady_clock;

// A reader's hold: its expiry and the lock the core keeps (to tell it when it expires).
struct ReaderHold {
  Clock::time_point expiry;
  std::weak_ptr<spi::HeldLock> lock;
};

// One name's state. Expired holds are free (purged lazily, their holders told first); the
// fencing counter outlives every hold so tokens keep increasing.
struct Entry {
  std::string writer;  // owner_key of the exclusive holder, empty if none
  Clock::time_point writer_expiry{};
  std::weak_ptr<spi::HeldLock> writer_lock;
  std::map<std::string, ReaderHold> readers;                 // owner_key → hold
  std::map<std::string, Clock::time_point> waiting_writers;  // waiter_id → heartbeat deadline
  std::deque<std::pair<std::string, Clock::time_point>> fair_queue;  // waiter_id, heartbeat
  std::uint64_t fence = 0;
  std::map<std::uint64_t, std::function<void()>> wakers;  // registration id → wake
  // Attempts firing the lost signals of expired holds (outside the mutex: callbacks run
  // there); nothing is granted while it is not 0, so a holder is told before the next grant.
  int telling = 0;
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

// The process-wide space named `name`, created on first use. A forked child starts with no
// spaces (its parent's holds are not its own).
std::shared_ptr<Space> space(const std::string& name);

}  // namespace dlock::mem
