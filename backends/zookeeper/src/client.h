// Client: the provider's one ZooKeeper session at a time, and the lock tree's root.
//
// Opening connects (bounded by connect_timeout), checks that the chroot exists and creates
// the prefix node. After the session expires the next request opens a new session: a new
// generation, whose holds and waiter nodes start from nothing (the old ones were lost).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "conn.h"
#include "dlock/error.h"
#include "options.h"

namespace dlock::zookeeper {

class Client {
 public:
  // Connects and prepares the root. Throws Error: unavailable (no server or no quorum
  // within connect_timeout), invalid_argument (a chroot that does not exist, an ACL that
  // denies creating the prefix node).
  explicit Client(ZkOptions options);

  const ZkOptions& options() const noexcept { return options_; }

  // The live session, opening a new one after an expiry; waits up to connect_timeout for
  // it to be connected. Throws Error(unavailable).
  std::shared_ptr<Conn> conn();

  // S: the session timeout the server granted, which may be above or below the one asked
  // for (it clamps it to its [min,max]SessionTimeout); the smallest any of our sessions was
  // granted. Known once the constructor has returned (it waits for the first session).
  std::chrono::milliseconds session_timeout() const noexcept {
    const long long granted = session_ms_.load();
    return granted > 0 ? std::chrono::milliseconds(granted) : options_.session_timeout;
  }
  // The server cannot expire a session before Conn::leader_basis() + S; our estimate stays
  // this much earlier (1% + 2 ms, as backends/redis allows for drift).
  Clock::duration safe_session_span() const noexcept;

  // Makes sure `path` exists as `mode` (ZOO_PERSISTENT or ZOO_CONTAINER) on `conn`.
  // Throws Error: invalid_argument when the chroot no longer exists (as at open).
  void ensure_node(Conn& conn, const std::string& path, int mode);

  // Waits for `reply` until now + command_timeout; nullopt on timeout.
  template <class T>
  std::optional<T> await(const std::shared_ptr<Reply<T>>& reply) const {
    return reply->wait_until(Clock::now() + options_.command_timeout);
  }

 private:
  void note_session(const Conn& c);
  // invalid_argument: "the chroot /x does not exist", at open or when deleted later.
  Error missing_chroot() const;

  const ZkOptions options_;
  std::mutex mu_;  // serializes opening sessions
  std::shared_ptr<Conn> current_;
  std::uint64_t generation_ = 0;
  std::atomic<long long> session_ms_{0};  // 0: no session granted yet
};

}  // namespace dlock::zookeeper
