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

// One name's state, erased as soon as nobody holds or awaits the name. Expired holds are free
// (purged lazily, their holders told first).
struct Entry {
  std::string writer;  // owner_key of the exclusive holder, empty if none
  Clock::time_point writer_expiry{};
  std::weak_ptr<spi::HeldLock> writer_lock;
  std::map<std::string, ReaderHold> readers;                 // owner_key → hold
  std::map<std::string, Clock::time_point> waiting_writers;  // waiter_id → heartbeat deadline
  std::deque<std::pair<std::string, Clock::time_point>> fair_queue;  // waiter_id, heartbeat
  std::map<std::uint64_t, std::function<void()>> wakers;  // registration id → wake
  // Attempts firing the lost signals of expired holds (outside the mutex: callbacks run
  // there); nothing is granted while it is not 0, so a holder is told before the next grant.
  int telling = 0;

  // Nothing to keep: no hold (expired or not), waiter, wake-up or signal being fired.
  bool idle() const noexcept {
    return writer.empty() && readers.empty() && waiting_writers.empty() && fair_queue.empty() &&
           wakers.empty() && telling == 0;
  }
};

struct Space {
  std::mutex mu;
  std::unordered_map<std::string, Entry> entries;  // guarded by mu
  std::uint64_t next_waker = 1;                    // guarded by mu
  // The last fencing token granted. One counter for every name: tokens strictly increase
  // across successive holders of each name, and an idle name needs no entry to keep its own.
  std::uint64_t fence = 0;  // guarded by mu

  // REQUIRES: mu held. Wakes every waiter of `e` (they re-check; spurious wake-ups are fine).
  static void wake_all(Entry& e) {
    for (auto& [id, wake] : e.wakers) wake();
  }

  // REQUIRES: mu held. Erases the entry at `it` if it is idle.
  void erase_if_idle(std::unordered_map<std::string, Entry>::iterator it) {
    if (it->second.idle()) entries.erase(it);
  }
};

// The process-wide space named `name`, created on first use. A forked child starts with no
// spaces (its parent's holds are not its own).
std::shared_ptr<Space> space(const std::string& name);

}  // namespace dlock::mem
