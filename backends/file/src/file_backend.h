// FileBackend: the spi::Backend of file:// — cross-process locks on one host from kernel
// open-file-description locks on one file per name in a lock directory.
//
// Per name, one lock file (see name_codec.h for its name) carries:
//   * byte range 1 ("main"): the lock; F_RDLCK for shared holders, F_WRLCK for a writer;
//   * byte range 0 ("gate"): writer preference. A writer that has to wait takes the gate
//     exclusively and keeps it while it waits for main, then drops it once main is held; a
//     reader takes gate and main together (shared) and drops the gate right away, so a
//     waiting writer blocks new readers;
//   * byte range 2 and bytes 0..31 of the contents: the fencing counter (fence_counter.h).
// Each hold is its own open file description, so holds exclude each other whether they are
// in different processes, or in one process (two providers, two owners). The kernel drops
// the locks when the holder closes the descriptor or dies. Waiters block in the kernel
// (kernel_wait.h), which hands the lock over at the release or death of its holder. Released
// descriptors are kept open for the next hold of the name (fd_pool.h).
//
// Lock files are never deleted: unlinking a lock file while another process has it open
// and is about to lock it would let two holders lock two different inodes. The directory
// grows by one small file per distinct name ever used; delete files only when no process
// uses the directory. Deleting or replacing a held lock file makes the hold lost: the
// watchdog's extend_many finds the path no longer names the held file.
//
// Thread safety: all methods may be called concurrently (SPI contract).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/spi/backend.h"
#include "fd_pool.h"
#include "options.h"

namespace dlock::file {

class FileBackend final : public spi::Backend {
 public:
  // REQUIRES: config.dir exists.
  explicit FileBackend(FileConfig config);
  ~FileBackend() override;

  const Capabilities& capabilities() const noexcept override { return caps_; }
  // A FileAcquisition (acquisition.h): owns the waiter's descriptor and its blocked wait.
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  bool release(spi::HeldLock& lock) override;
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

  // The full path of the lock file for `name`. For tests and diagnostics.
  std::string path_for(std::string_view name) const;

 private:
  const FileConfig config_;
  Capabilities caps_;
  FdPool pool_;
};

}  // namespace dlock::file
