// ZkHeldLock: a granted lock node, as the core keeps it.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "conn.h"
#include "dlock/spi/held_lock.h"

namespace dlock::zookeeper {

class ZkHeldLock final : public spi::HeldLock,
                         public WatchSink,
                         public std::enable_shared_from_this<ZkHeldLock> {
 public:
  ZkHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
             Clock::time_point server_expiry, std::shared_ptr<Conn> conn, std::string path)
      : HeldLock(std::move(name), mode, std::move(owner_key), token, server_expiry),
        conn_(std::move(conn)),
        path_(std::move(path)) {}

  // Never blocks: a hold dropped without a release (which the core never does on purpose)
  // has its node deleted in the background.
  ~ZkHeldLock() override {
    if (!settled_.exchange(true)) Conn::guaranteed_delete(conn_, path_);
  }

  const std::shared_ptr<Conn>& conn() const noexcept { return conn_; }
  const std::string& path() const noexcept { return path_; }

  // True the first time: the caller now owns the node's deletion.
  bool settle() noexcept { return !settled_.exchange(true); }
  bool settled() const noexcept { return settled_.load(); }

  // A release() is about to send the delete of our node. Returns true if an earlier
  // release() already sent one that was never confirmed (it may land any time). From now on
  // the node's disappearance is our release, not a loss: it fires no lost signal.
  bool begin_release() noexcept { return releasing_.exchange(true); }

  // The watch on our own node (set at the first probe, off the acquire's path): a deletion
  // from outside fires the lost signal at once.
  bool start_watching() noexcept { return !watched_.exchange(true); }

  void node_gone(const std::string&) noexcept override {
    if (!settled_.load() && !releasing_.load()) mark_lost();
  }
  void watch_failed(const std::string&) noexcept override { watched_ = false; }
  // Our own node refuses us only if its ACL was changed from outside: the next probe (S/3
  // later, not at once) tries again.
  void watch_refused(const std::string& path, int) noexcept override { watch_failed(path); }
  void session_ended() noexcept override { mark_lost(); }

 private:
  const std::shared_ptr<Conn> conn_;
  const std::string path_;
  std::atomic<bool> settled_{false};
  std::atomic<bool> watched_{false};
  std::atomic<bool> releasing_{false};
};

}  // namespace dlock::zookeeper
