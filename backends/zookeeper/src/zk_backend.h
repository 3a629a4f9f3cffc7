// ZkBackend: locks as ephemeral-sequential nodes on ZooKeeper (brief §4; layout and bounds
// in backends/zookeeper/README.md). One session per provider; a session backend: S (the
// negotiated session timeout) is the default lease, the lost-signal and the crash bound.
#pragma once

#include <memory>

#include "client.h"
#include "dlock/spi/backend.h"

namespace dlock::zookeeper {

class ZkBackend final : public spi::Backend {
 public:
  // Connects (see Client). Throws Error.
  explicit ZkBackend(ZkOptions options);

  const Capabilities& capabilities() const noexcept override { return caps_; }
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  // Deletes our node. True once deleted (also when a delete an earlier, failed release()
  // sent may have deleted it); false when the session that held it is gone or the node was
  // deleted from outside. Throws Error(unavailable) when the delete is not confirmed within
  // command_timeout: the hold then stays as it was (probed, marked lost if the session
  // ends) and a later release() sends the delete again. A hold already lost (the core's
  // release after the lost signal), or one the core drops unreleased (ZkHeldLock's
  // destructor), has its node deleted in the background instead, retried until it is gone.
  bool release(spi::HeldLock& lock) override;
  // One probe (exists on the root) per session, however many holds it carries; the first
  // probe of a hold also puts a watch on its node, so a deletion from outside is seen at once.
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

 private:
  std::shared_ptr<Client> client_;
  Capabilities caps_;
};

}  // namespace dlock::zookeeper
