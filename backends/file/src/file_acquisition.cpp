#include "file_acquisition.h"

#include <sys/stat.h>

#include <utility>

#include "fence_counter.h"
#include "file_backend.h"
#include "file_held_lock.h"
#include "lock_file.h"
#include "name_codec.h"
#include "range_lock.h"

namespace dlock::file {
namespace {

// A caller whose lock file is replaced under it this many times in a row gets Busy.
constexpr int kReplacedRetries = 3;

// Raises IN_ATTRIB on the lock file: wakes the waiters the gate kept out.
void signal_waiters(int fd) noexcept { ::futimens(fd, nullptr); }

}  // namespace

FileAcquisition::FileAcquisition(const FileConfig& config, std::shared_ptr<DirWatcher> watcher,
                                 const spi::AttemptRequest& request, std::function<void()> wake)
    : config_(config),
      request_(request),
      watcher_(std::move(watcher)),
      wake_(std::move(wake)),
      file_name_(lock_file_name(request.name)),
      path_(config.dir + "/" + file_name_) {}

// Members do the work: the registration goes first, then the descriptor closes (dropping
// a writer's gate). Nothing here throws.
FileAcquisition::~FileAcquisition() = default;

std::chrono::milliseconds FileAcquisition::fallback_poll() const noexcept { return config_.poll; }

spi::Attempt FileAcquisition::attempt() {
  spi::Attempt result = attempt_rounds();
  if (std::holds_alternative<spi::Busy>(result) && request_.will_wait && !registration_) {
    // Only now do we know we wait. A release between the attempt above and this
    // registration raised its event before anyone listened: attempt once more.
    registration_ = watcher_->watch(file_name_, wake_);
    result = attempt_rounds();
  }
  if (std::holds_alternative<spi::Busy>(result) && !request_.will_wait) {
    fd_.reset();  // a try-once leaves nothing behind (drops a writer's gate)
    gate_held_ = false;
  }
  return result;
}

spi::Attempt FileAcquisition::attempt_rounds() {
  for (int round = 0; round < kReplacedRetries; ++round) {
    // A kept descriptor whose file was replaced would wait on an orphan: start over.
    if (fd_.valid() && identity(fd_.get(), path_) != Identity::same) {
      fd_.reset();
      gate_held_ = false;
    }
    if (!fd_.valid()) fd_ = open_lock_file(config_.dir, path_, config_.durable);
    switch (lock_once()) {
      case Outcome::granted: return grant();
      case Outcome::busy: return spi::Busy{};
      case Outcome::replaced:
        fd_.reset();  // closing drops whatever the orphan held
        gate_held_ = false;
        break;
    }
  }
  return spi::Busy{};
}

FileAcquisition::Outcome FileAcquisition::lock_once() {
  const int fd = fd_.get();
  const char* path = path_.c_str();
  if (request_.mode == LockMode::exclusive) {
    if (!gate_held_) {
      if (!try_lock_range(fd, Range::gate, RangeMode::exclusive, path)) return Outcome::busy;
      gate_held_ = true;
    }
    if (!try_lock_range(fd, Range::main, RangeMode::exclusive, path)) {
      return Outcome::busy;  // keep the gate: new readers stay out while we wait
    }
    unlock_range(fd, Range::gate);
    gate_held_ = false;
    signal_waiters(fd);  // a writer queued behind us may now take the gate
  } else {
    if (!try_lock_range(fd, Range::gate, RangeMode::shared, path)) {
      return Outcome::busy;  // a writer is waiting or passing
    }
    bool ok = try_lock_range(fd, Range::main, RangeMode::shared, path);
    unlock_range(fd, Range::gate);
    if (!ok) return Outcome::busy;
  }
  // Locked an inode that was unlinked or replaced between open and lock? It guards nothing.
  return identity(fd, path_) == Identity::same ? Outcome::granted : Outcome::replaced;
}

spi::Attempt FileAcquisition::grant() {
  // If the counter update throws, fd_ closes with this object and drops the lock.
  std::uint64_t token =
      bump_fence_counter(fd_.get(), path_.c_str(), config_.durable, wall_clock_floor());
  return std::make_shared<FileHeldLock>(std::string(request_.name), request_.mode,
                                        std::string(request_.owner_key), token, std::move(fd_),
                                        path_);
}

}  // namespace dlock::file
