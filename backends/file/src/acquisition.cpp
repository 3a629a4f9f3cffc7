#include "acquisition.h"

#include <utility>

#include "fence_counter.h"
#include "file_backend.h"
#include "file_held_lock.h"
#include "name_codec.h"
#include "range_lock.h"
#include "errors.h"

namespace dlock::file {
namespace {

// A caller whose lock file is replaced under it this many times in a row gets Busy.
constexpr int kReplacedRetries = 3;

}  // namespace

FileAcquisition::FileAcquisition(const FileConfig& config, FdPool& pool,
                                 const spi::AttemptRequest& request, std::function<void()> wake)
    : config_(config),
      pool_(pool),
      request_(request),
      wake_(std::move(wake)),
      path_(config.dir + "/"),
      file_name_at_(path_.size()) {
  path_ += lock_file_name(request.name);
}

// Drops a writer's gate, the queue byte, a lock the thread took too late or a grant that
// failed. Nothing here throws.
FileAcquisition::~FileAcquisition() { drop_file(); }

std::chrono::milliseconds FileAcquisition::fallback_poll() const noexcept { return config_.poll; }

void FileAcquisition::drop_file() noexcept {
  wait_.reset();  // cancelled and joined: nothing locks on file_ any more
  // Unlocked explicitly, not by closing: a child fork()ed meanwhile shares the open file
  // description, which keeps its locks until the last of its descriptors closes.
  if (file_.valid()) unlock_ranges(file_.get(), Range::gate, 4);
  file_ = LockFd{};
  pooled_ = false;
}

std::optional<spi::Attempt> FileAcquisition::collect_wait() {
  switch (wait_->state()) {
    case KernelWait::State::waiting:
      // Waiting on a file that was replaced meanwhile would wait on an orphan.
      if (identity(file_, path_) == Identity::replaced) {
        drop_file();
        return std::nullopt;
      }
      // A writer's thread may be blocked on the gate of another waiting writer that does
      // not run (stopped, in a debugger) while main is free: take main directly then.
      // Holding main proves that whoever holds the gate only waits. The kernel's wake-up
      // stays the way a waiter gets the lock; this poll only gets past such a gate.
      if (request_.mode == LockMode::exclusive &&
          try_lock_ranges(file_.get(), Range::main, 2, RangeMode::exclusive, path_.c_str())) {
        wait_.reset();  // joined; what its thread took (the gate, perhaps) is ours too
        unlock_ranges(file_.get(), Range::counter, 2);  // and the queue byte
        if (identity(file_, path_) == Identity::same) return grant();
        drop_file();
        return std::nullopt;
      }
      return spi::Busy{};
    case KernelWait::State::failed: {
      int err = wait_->error();
      drop_file();
      throw sys_error("fcntl(F_OFD_SETLKW)", path_, err);
    }
    case KernelWait::State::locked:
      wait_.reset();  // joins the finished thread
      if (identity(file_, path_) == Identity::same) return grant();
      drop_file();  // locked an orphan: let go of it
      return std::nullopt;
  }
  return spi::Busy{};
}

spi::Attempt FileAcquisition::attempt() {
  if (wait_) {
    if (auto done = collect_wait()) return std::move(*done);
  }
  const std::string_view file_name = std::string_view(path_).substr(file_name_at_);
  for (int round = 0; round < kReplacedRetries; ++round) {
    if (!file_.valid()) {
      file_ = pool_.take(file_name);
      pooled_ = file_.valid();
      if (!pooled_) file_ = open_lock_file(config_.dir, path_, config_.durable);
    }
    Outcome outcome = try_lock();
    if (outcome == Outcome::granted) return grant();
    if (outcome == Outcome::busy && pooled_ && identity(file_, path_) == Identity::replaced) {
      outcome = Outcome::replaced;  // busy on an orphan says nothing about the file
    }
    if (outcome == Outcome::replaced) {
      drop_file();  // lets go of whatever the orphan held
      continue;
    }
    if (!request_.will_wait) {
      pool_.put(file_name, std::move(file_));  // a failed try leaves nothing behind
      pooled_ = false;
      return spi::Busy{};
    }
    // Block in the kernel from now on: no wake-up can be lost. Without a thread (EAGAIN),
    // the next attempts poll.
    wait_ = KernelWait::start(file_.get(), request_.mode, wake_);
    return spi::Busy{};
  }
  if (!request_.will_wait) drop_file();
  return spi::Busy{};
}

FileAcquisition::Outcome FileAcquisition::try_lock() {
  const int fd = file_.get();
  const char* path = path_.c_str();
  if (request_.mode == LockMode::exclusive) {
    // Gate, main, counter and queue in one request: fails while the lock is held, while a
    // writer waits for it (holding the gate) and while anyone waits at all (holding the
    // queue shared). So a releaser that comes straight back queues up behind the waiters
    // the kernel just woke instead of taking the lock again before they run. The writer
    // keeps gate and main (new readers stay out) and lets go of counter and queue.
    if (!try_lock_ranges(fd, Range::gate, 4, RangeMode::exclusive, path)) {
      // A try-once does not queue: it takes a lock that is free while others wait. It takes
      // main (and the counter) without the gate, which a waiting writer may hold, even a
      // stopped one; holding main, it knows a gate holder only waits.
      if (request_.will_wait ||
          !try_lock_ranges(fd, Range::main, 2, RangeMode::exclusive, path)) {
        return Outcome::busy;
      }
    }
    unlock_ranges(fd, Range::counter, 2);
  } else {
    // Gate and main together, shared: fails while a writer holds or waits (holds the gate).
    if (!try_lock_ranges(fd, Range::gate, 2, RangeMode::shared, path)) return Outcome::busy;
    unlock_range(fd, Range::gate);
  }
  // Locked an inode that was unlinked or replaced since it was opened? It guards nothing.
  return identity(file_, path_) == Identity::same ? Outcome::granted : Outcome::replaced;
}

spi::Attempt FileAcquisition::grant() {
  // If the counter update throws, file_ stays here and the destructor drops the lock.
  std::uint64_t token =
      bump_fence_counter(file_.get(), path_.c_str(), config_.durable, wall_clock_floor(),
                         request_.mode == LockMode::exclusive);
  pooled_ = false;
  return std::make_shared<FileHeldLock>(std::string(request_.name), request_.mode,
                                        std::string(request_.owner_key), token, std::move(file_),
                                        std::move(path_), file_name_at_);  // never used again
}

}  // namespace dlock::file
