// The mem:// backend: the SPI on a process-wide lock table. Private to the mem backend.
#pragma once

#include <memory>

#include "dlock/spi/backend.h"
#include "mem_space.h"

namespace dlock::mem {

class MemBackend final : public spi::Backend {
 public:
  MemBackend(std::shared_ptr<Space> space, std::chrono::milliseconds default_lease);

  const Capabilities& capabilities() const noexcept override { return caps_; }
  spi::Attempt try_acquire(const spi::AttemptRequest& request) override;
  std::unique_ptr<spi::WaitRegistration> prepare_wait(const spi::AttemptRequest& request,
                                                      std::function<void()> wake) override;
  void abandon(const spi::AttemptRequest& request) noexcept override;
  bool release(spi::HeldLock& lock) override;
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

 private:
  std::shared_ptr<Space> space_;
  Capabilities caps_;
};

}  // namespace dlock::mem
