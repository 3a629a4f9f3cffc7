#include "file_backend.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "dlock/error.h"
#include "fence_counter.h"
#include "file_held_lock.h"
#include "lock_file.h"
#include "name_codec.h"
#include "range_lock.h"

namespace dlock::file {
namespace {

// A caller whose lock file is replaced under it this many times in a row gets Busy.
constexpr int kReplacedRetries = 3;

FileHeldLock& as_file_lock(spi::HeldLock& lock) {
  auto* f = dynamic_cast<FileHeldLock*>(&lock);
  if (f == nullptr) throw Error(ErrorCode::internal, "file://: lock from another backend");
  return *f;
}

// Raises IN_ATTRIB on the lock file: wakes the waiters the gate kept out.
void signal_waiters(int fd) noexcept { ::futimens(fd, nullptr); }

}  // namespace

FileBackend::FileBackend(FileConfig config)
    : config_(std::move(config)), watcher_(DirWatcher::for_directory(config_.dir)) {
  caps_.reentrant = true;
  caps_.read_write = true;
  caps_.fair = false;
  caps_.fencing = true;
  caps_.push_wakeup = true;
  caps_.liveness = Liveness::session;
  caps_.max_name_bytes = kMaxNameBytes;
  caps_.default_lease = config_.default_lease;
  // Found by the watchdog's check, every third of the lease (plus scheduling slack).
  caps_.lost_signal_bound = config_.default_lease / 3 + std::chrono::milliseconds(100);
  // The kernel frees the lock at the holder's death; waiters see it through the close
  // event or, at worst, their next poll.
  caps_.crash_release_bound = std::max<std::chrono::milliseconds>(std::chrono::seconds(1),
                                                                  2 * config_.poll);
}

FileBackend::~FileBackend() = default;

std::string FileBackend::path_for(std::string_view name) const {
  return config_.dir + "/" + lock_file_name(name);
}

FileBackend::Waiter FileBackend::take_waiter(std::string_view waiter_id) {
  std::lock_guard lock(mu_);
  auto it = waiters_.find(std::string(waiter_id));
  if (it == waiters_.end()) return {};
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  return w;
}

FileBackend::Outcome FileBackend::attempt(Waiter& w, LockMode mode, const std::string& path) {
  int fd = w.fd.get();
  if (mode == LockMode::exclusive) {
    if (!w.gate_held) {
      if (!try_lock_range(fd, Range::gate, RangeMode::exclusive, path.c_str())) {
        return Outcome::busy;
      }
      w.gate_held = true;
    }
    if (!try_lock_range(fd, Range::main, RangeMode::exclusive, path.c_str())) {
      return Outcome::busy;  // keep the gate: new readers stay out while we wait
    }
    unlock_range(fd, Range::gate);
    w.gate_held = false;
    signal_waiters(fd);  // a writer queued behind us may now take the gate
  } else {
    if (!try_lock_range(fd, Range::gate, RangeMode::shared, path.c_str())) {
      return Outcome::busy;  // a writer is waiting or passing
    }
    bool ok = try_lock_range(fd, Range::main, RangeMode::shared, path.c_str());
    unlock_range(fd, Range::gate);
    if (!ok) return Outcome::busy;
  }
  // Locked an inode that was unlinked or replaced between open and lock? It guards nothing.
  return identity(fd, path) == Identity::same ? Outcome::granted : Outcome::replaced;
}

spi::Attempt FileBackend::try_acquire(const spi::AttemptRequest& request) {
  const std::string path = path_for(request.name);
  Waiter w = take_waiter(request.waiter_id);
  for (int round = 0; round < kReplacedRetries; ++round) {
    // A kept descriptor whose file was replaced would wait on an orphan: start over.
    if (w.fd.valid() && identity(w.fd.get(), path) != Identity::same) w = Waiter{};
    if (!w.fd.valid()) w.fd = open_lock_file(config_.dir, path, config_.durable);
    Outcome outcome = attempt(w, request.mode, path);
    if (outcome == Outcome::replaced) {
      w = Waiter{};  // closing drops whatever the orphan held
      continue;
    }
    if (outcome == Outcome::busy) {
      if (request.will_wait) {
        std::lock_guard lock(mu_);
        waiters_.insert_or_assign(std::string(request.waiter_id), std::move(w));
      }
      return spi::Busy{};  // w (if still here) closes: a try-once leaves nothing behind
    }
    // Granted. If the counter update throws, w's descriptor closes and drops the lock.
    std::uint64_t token =
        bump_fence_counter(w.fd.get(), path.c_str(), config_.durable, wall_clock_floor());
    return std::make_shared<FileHeldLock>(std::string(request.name), request.mode,
                                          std::string(request.owner_key), token,
                                          std::move(w.fd), path);
  }
  return spi::Busy{};
}

std::unique_ptr<spi::WaitRegistration> FileBackend::prepare_wait(
    const spi::AttemptRequest& request, std::function<void()> wake) {
  return watcher_->watch(lock_file_name(request.name), std::move(wake), config_.poll);
}

void FileBackend::abandon(const spi::AttemptRequest& request) noexcept {
  try {
    Waiter w = take_waiter(request.waiter_id);  // closing it releases a writer's gate
  } catch (...) {
    // Only std::string's allocation can throw here; nothing was kept then.
  }
}

bool FileBackend::release(spi::HeldLock& lock) {
  FileHeldLock& held = as_file_lock(lock);
  std::lock_guard guard(held.mu);
  if (!held.fd.valid()) return false;
  if (held.pid != ::getpid()) {
    held.fd.reset();  // a forked child: drop our copy, never the parent's lock
    return false;
  }
  bool ours = identity(held.fd.get(), held.path) == Identity::same;
  // Unlock before closing, so the close event never reaches a waiter before the lock is free.
  unlock_range(held.fd.get(), Range::main);
  held.fd.reset();
  return ours;
}

void FileBackend::extend_many(std::span<spi::HeldLock* const> locks,
                              std::chrono::milliseconds /*lease*/,
                              std::span<spi::RenewStatus> out) noexcept {
  for (std::size_t i = 0; i < locks.size() && i < out.size(); ++i) {
    auto* held = dynamic_cast<FileHeldLock*>(locks[i]);
    if (held == nullptr) {
      out[i] = spi::RenewStatus::not_held;
      continue;
    }
    std::lock_guard guard(held->mu);
    if (!held->fd.valid()) {
      out[i] = spi::RenewStatus::not_held;
      continue;
    }
    switch (identity(held->fd.get(), held->path)) {
      case Identity::same: out[i] = spi::RenewStatus::renewed; break;
      case Identity::replaced: out[i] = spi::RenewStatus::not_held; break;
      case Identity::unknown: out[i] = spi::RenewStatus::failed; break;
    }
  }
}

}  // namespace dlock::file
