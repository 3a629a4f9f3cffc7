// FileAcquisition: one file:// acquire call, from its first attempt until it is granted or
// given up (spi::Acquisition).
//
// It owns the waiter's own descriptor of the lock file, kept open between attempts: a writer
// keeps the gate on it while it waits (so new readers stay out), and a failed attempt closes
// nothing, so it raises no inotify event and waiters cannot wake each other in a loop. It
// also owns the waiter's DirWatcher registration. Destroying it closes the descriptor, which
// drops a writer's gate: an abandoned acquire leaves nothing behind.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "dir_watcher.h"
#include "dlock/spi/backend.h"
#include "unique_fd.h"

namespace dlock::file {

struct FileConfig;

class FileAcquisition final : public spi::Acquisition {
 public:
  // `config` and `request` outlive this object (the backend owns the one, the core the other).
  FileAcquisition(const FileConfig& config, std::shared_ptr<DirWatcher> watcher,
                  const spi::AttemptRequest& request, std::function<void()> wake);
  ~FileAcquisition() override;

  // One attempt; on Busy for a waiting acquire, the first call registers with the watcher
  // and tries once more, so a release between the two cannot go unnoticed.
  spi::Attempt attempt() override;
  std::chrono::milliseconds fallback_poll() const noexcept override;

 private:
  enum class Outcome { granted, busy, replaced };

  spi::Attempt attempt_rounds();
  Outcome lock_once();
  spi::Attempt grant();

  const FileConfig& config_;
  const spi::AttemptRequest& request_;
  std::shared_ptr<DirWatcher> watcher_;
  std::function<void()> wake_;
  const std::string file_name_;
  const std::string path_;
  UniqueFd fd_;
  bool gate_held_ = false;  // writers: fd_ holds the gate
  // Last member: unregistered first, so `wake_` is never called after it is destroyed.
  std::unique_ptr<DirWatcher::Registration> registration_;
};

}  // namespace dlock::file
