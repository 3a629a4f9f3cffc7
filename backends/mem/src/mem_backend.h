// The mem:// backend: the SPI on a process-wide lock table. Private to the mem backend.
#pragma once

#include <memory>
#include <optional>

#include "dlock/spi/backend.h"
#include "mem_space.h"

namespace dlock::mem {

class MemBackend final : public spi::Backend {
 public:
  MemBackend(std::shared_ptr<Space> space, std::chrono::milliseconds default_lease);

  const Capabilities& capabilities() const noexcept override { return caps_; }
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  bool release(spi::HeldLock& lock) override;
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

 private:
  friend class MemAcquisition;
  // One atomic attempt on the table (refreshes the waiter's heartbeat). First fires the lost
  // signal of every expired hold of the name whose holder has not been told yet.
  spi::Attempt attempt(const spi::AttemptRequest& request);
  // REQUIRES: space_->mu held, no expired hold in `e` left untold.
  spi::Attempt attempt_locked(Entry& e, const spi::AttemptRequest& request, Clock::time_point now);
  // Registers `wake` for releases of the name; returns its id in Entry::wakers.
  std::uint64_t add_waker(std::string_view name, std::function<void()> wake);
  // Unregisters a waker (a waiter's that was granted).
  void remove_waker(std::string_view name, std::uint64_t waker) noexcept;
  // Removes what a given-up waiter left: its waker, its writer-preference or queue entry.
  void abandon(const spi::AttemptRequest& request, std::optional<std::uint64_t> waker) noexcept;

  std::shared_ptr<Space> space_;
  Capabilities caps_;
};

}  // namespace dlock::mem
