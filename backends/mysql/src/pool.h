// Connections of one backend: an idle cache per class and the `pool` cap on all open ones
// (idle, pinned by holds, waiting). No connection is ever reconnected: a broken one is dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "connection.h"
#include "fd_monitor.h"
#include "options.h"

namespace dlock::mysql {

class Pool {
 public:
  // `monitor`, if given, watches every connection this pool opens for hang-up: it marks the
  // connection broken and its pinned holds lost. It must outlive the pool.
  explicit Pool(const MysqlOptions& options, FdMonitor* monitor = nullptr);

  // An idle connection of class `cls` (dropping those idle for idle_limit() or more: the
  // server's wait_timeout would end them), or a new one. Waits up to command_timeout for a slot
  // when `pool` connections are open, then throws Error(unavailable) saying so.
  // Throws Error for connect failures.
  std::shared_ptr<Connection> get(ConnClass cls);
  // An idle connection of class `cls`, or a new one not counted against the cap, at once:
  // for a KILL QUERY, which must not wait for a slot. put() drops it if it is outside the cap.
  // Throws Error for connect failures.
  std::shared_ptr<Connection> get_outside_cap(ConnClass cls);
  // Returns a healthy connection of this pool's cap to the idle cache; drops a broken one and
  // one opened outside the cap.
  void put(std::shared_ptr<Connection> conn) noexcept;
  std::size_t open() const { return slots_->open(); }

 private:
  std::shared_ptr<Connection> pop_idle(ConnClass cls);
  bool drop_one_idle();

  const MysqlOptions& options_;
  FdMonitor* const monitor_;
  std::shared_ptr<Slots> slots_;
  std::atomic<bool> behind_proxy_{false};  // see Connection::open
  std::mutex mu_;
  std::vector<std::shared_ptr<Connection>> idle_;  // guarded by mu_
};

}  // namespace dlock::mysql
