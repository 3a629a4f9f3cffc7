// FileBackend: the spi::Backend of file:// — cross-process locks on one host from kernel
// open-file-description locks on one file per name in a lock directory.
//
// Per name, one lock file (see name_codec.h for its name) carries:
//   * byte range 1 ("main"): the lock; F_RDLCK for shared holders, F_WRLCK for a writer;
//   * byte range 0 ("gate"): writer preference. A writer takes the gate exclusively and
//     keeps it while it waits for main, then drops it once main is held; a reader must pass
//     the gate shared (take, then drop right after its main attempt), so a waiting writer
//     blocks new readers. Each waiter keeps its own descriptor between attempts
//     (owned by its FileAcquisition);
//   * byte range 2 and bytes 0..31 of the contents: the fencing counter (fence_counter.h).
// Each hold is its own open file description, so holds exclude each other whether they are
// in different processes, or in one process (two providers, two owners). The kernel drops
// the locks when the holder closes the descriptor or dies.
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

#include "dir_watcher.h"
#include "dlock/spi/backend.h"

namespace dlock::file {

struct FileConfig {
  std::string dir;                             // absolute, existing directory, no trailing '/'
  std::chrono::milliseconds poll{100};         // fallback poll while waiting
  bool durable = true;                         // fsync the fencing counter before granting
  std::chrono::milliseconds default_lease{3000};  // the watchdog checks every third of it
};

class FileBackend final : public spi::Backend {
 public:
  // REQUIRES: config.dir exists. Starts the directory watcher (never throws for inotify
  // trouble: waiters then poll).
  explicit FileBackend(FileConfig config);
  ~FileBackend() override;

  const Capabilities& capabilities() const noexcept override { return caps_; }
  // A FileAcquisition (file_acquisition.h): owns the waiter's descriptor and wake-ups.
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
  std::shared_ptr<DirWatcher> watcher_;
};

}  // namespace dlock::file
