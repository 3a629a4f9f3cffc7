// Push wake-ups: one pub/sub connection per provider, on its own thread, with one
// ref-counted subscription per lock channel shared by every local waiter of that lock.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "connection.h"
#include "options.h"

namespace dlock::redis {

// Messages on a lock's channel (published by the Lua scripts):
//   "g<token>:<waiter id>"   the queue handed the lock to that waiter (for a short pick-up
//                            lease): it is woken, and its next attempt picks the lock up.
// Thread safety: every method is thread-safe. Wake callbacks run on the subscriber's thread
// and must not call back into the backend.
class Subscriber : public std::enable_shared_from_this<Subscriber> {
 public:
  using Clock = std::chrono::steady_clock;
  struct Polls {
    std::chrono::milliseconds healthy;  // while subscribed
    std::chrono::milliseconds down;     // while the subscriber is not connected
  };

  struct Entry;
  struct Channel;

  // A waiter's registration; destroying it unregisters (after that its wake is never called).
  class Registration {
   public:
    Registration(std::shared_ptr<Subscriber> sub, std::shared_ptr<Entry> e, Polls polls);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    // polls.healthy while the channel is subscribed, polls.down otherwise.
    std::chrono::milliseconds fallback_poll() const noexcept;

   private:
    std::shared_ptr<Subscriber> sub_;
    std::shared_ptr<Entry> entry_;
    Polls polls_;
  };

  explicit Subscriber(RedisOptions options);
  // Stops and joins the thread. Never throws.
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Registers a waiter on `channel` and returns once the channel's subscription is confirmed
  // by the server (so nothing published afterwards can be missed), or at once while the
  // subscriber is disconnected, or after command_timeout. Destroying the result unregisters;
  // after that `wake` is never called again. Starts the thread on first use.
  // A grant published before the registration is not seen here: the waiter's next attempt
  // (which must go to the server) finds it.
  std::unique_ptr<Registration> add(const std::string& channel, std::string_view waiter_id,
                                    Polls polls, std::function<void()> wake);

  // True while `channel` is subscribed and confirmed on a live connection: add() would then
  // return at once, without a round trip, and miss nothing published after it.
  bool subscribed(const std::string& channel);

 private:
  void remove(const std::shared_ptr<Entry>& entry) noexcept;
  void run() noexcept;
  bool connect_and_resubscribe() noexcept;
  void disconnect() noexcept;
  bool send_pending() noexcept;
  bool read_replies() noexcept;
  void on_reply(const redisReply* r, std::vector<std::shared_ptr<Entry>>& to_wake);
  void signal() noexcept;
  static void wake(const std::shared_ptr<Entry>& e) noexcept;

  enum class State { starting, up, down };
  const RedisOptions options_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<std::string, std::shared_ptr<Channel>> channels_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> by_waiter_;
  std::vector<std::shared_ptr<Channel>> dirty_;  // channels that may need (un)subscribing
  std::atomic<State> state_{State::starting};
  std::atomic<std::size_t> entries_{0};
  bool stop_ = false;
  bool started_ = false;
  bool had_connection_ = false;  // guarded by mu_
  int event_fd_ = -1;
  std::unique_ptr<std::thread> thread_;
  const pid_t owner_pid_;  // a forked child has no thread to stop
  std::unique_ptr<Connection> conn_;  // only the thread touches it
};

}  // namespace dlock::redis
