// FileAcquisition: one file:// acquire call, from its first attempt until it is granted or
// given up (spi::Acquisition).
//
// Its first attempt tries the lock without blocking on a descriptor of the lock file taken
// from the backend's pool (or opened). When that finds the lock busy and the acquire waits,
// it keeps the descriptor and starts a KernelWait: a thread blocked in F_OFD_SETLKW on it,
// which takes the lock in the kernel the moment it is free (also at a holder's death) and
// then calls `wake`; the next attempt hands that lock out. While it waits, each attempt
// (a fallback poll) checks that the lock file was not replaced, which would leave it
// waiting on an orphan, and a writer tries main alone, in case its thread is blocked on
// the gate of another waiting writer that does not run (stopped) while main is free.
// Destroying it cancels the blocked thread, then unlocks every range of the descriptor (a
// writer's gate, the queue byte, a grant that raced with the give-up) and closes it;
// closing alone would not do when a forked child shares the description.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "dlock/spi/backend.h"
#include "fd_pool.h"
#include "kernel_wait.h"
#include "lock_file.h"

namespace dlock::file {

struct FileConfig;

class FileAcquisition final : public spi::Acquisition {
 public:
  // `config`, `pool` (the backend's) and `request` (the core's) outlive this object.
  FileAcquisition(const FileConfig& config, FdPool& pool, const spi::AttemptRequest& request,
                  std::function<void()> wake);
  ~FileAcquisition() override;

  spi::Attempt attempt() override;
  std::chrono::milliseconds fallback_poll() const noexcept override;

 private:
  enum class Outcome { granted, busy, replaced };

  std::optional<spi::Attempt> collect_wait();  // nullopt: start over without a descriptor
  Outcome try_lock();
  spi::Attempt grant();
  void drop_file() noexcept;  // cancels the wait, unlocks and closes file_

  const FileConfig& config_;
  FdPool& pool_;
  const spi::AttemptRequest& request_;
  std::function<void()> wake_;
  std::string path_;
  std::size_t file_name_at_;  // where the file name starts in path_
  LockFd file_;
  bool pooled_ = false;  // file_ came from the pool (it may be a replaced file's orphan)
  // Declared last: destroyed (cancelled, joined) before file_ and wake_ go.
  std::unique_ptr<KernelWait> wait_;
};

}  // namespace dlock::file
