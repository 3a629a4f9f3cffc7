// Listener: lease mode's wake-ups. One connection per provider LISTENs on the table's
// channel; a release NOTIFYs the digest of the name it freed, and the listener wakes the
// waiters registered for that digest. While the connection is down (or behind a
// transaction pooler, where LISTEN does not work) waiters poll; when it comes back every
// waiter is woken once, since releases in between were missed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "connection.h"
#include "options.h"

namespace dlock::postgres {

class Listener {
 public:
  Listener(PgOptions options, std::string channel);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Calls `wake` whenever `payload` is notified (or the channel was down). Returns an id.
  std::uint64_t add(const std::string& payload, std::function<void()> wake);
  void remove(std::uint64_t id);
  // True while the LISTEN connection is up.
  bool healthy() const noexcept { return healthy_.load(); }

 private:
  void loop();
  void wake_matching(const std::string* payload);
  void sleep_ms(int ms);

  const PgOptions options_;
  const std::string channel_;
  std::mutex mu_;
  std::map<std::uint64_t, std::pair<std::string, std::function<void()>>> waiters_;  // guarded
  std::uint64_t next_id_ = 1;                                                         // guarded
  std::atomic<bool> healthy_{false};
  std::atomic<bool> stop_{false};
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace dlock::postgres
