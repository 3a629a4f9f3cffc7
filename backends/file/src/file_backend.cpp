#include "file_backend.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "dlock/error.h"
#include "acquisition.h"
#include "file_held_lock.h"
#include "lock_file.h"
#include "name_codec.h"
#include "range_lock.h"

namespace dlock::file {
namespace {

FileHeldLock& as_file_lock(spi::HeldLock& lock) {
  auto* f = dynamic_cast<FileHeldLock*>(&lock);
  if (f == nullptr) throw Error(ErrorCode::internal, "file://: lock from another backend");
  return *f;
}

}  // namespace

FileBackend::FileBackend(FileConfig config)
    : config_(std::move(config)) {
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
  // The kernel frees the lock at the holder's death and hands it to a waiter blocked on it
  // at once; a waiter without a thread of its own (none could be started) polls.
  caps_.crash_release_bound = std::max<std::chrono::milliseconds>(std::chrono::seconds(1),
                                                                  2 * config_.poll);
}

FileBackend::~FileBackend() = default;

std::string FileBackend::path_for(std::string_view name) const {
  return config_.dir + "/" + lock_file_name(name);
}

std::unique_ptr<spi::Acquisition> FileBackend::begin_acquire(const spi::AttemptRequest& request,
                                                           std::function<void()> wake) {
  return std::make_unique<FileAcquisition>(config_, pool_, request, std::move(wake));
}

bool FileBackend::release(spi::HeldLock& lock) {
  FileHeldLock& held = as_file_lock(lock);
  std::lock_guard guard(held.mu);
  if (!held.file.valid()) return false;
  bool ours = identity(held.file, held.path) == Identity::same;
  // Gate and main (a writer holds both, a reader main): a waiter blocked on them gets
  // them now, in the kernel.
  unlock_ranges(held.file.get(), Range::gate, 2);
  if (ours) {
    pool_.put(held.file_name(), std::move(held.file));  // kept open for the next hold
  }
  held.file = LockFd{};
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
    if (!held->file.valid()) {
      out[i] = spi::RenewStatus::not_held;
      continue;
    }
    switch (identity(held->file, held->path)) {
      case Identity::same: out[i] = spi::RenewStatus::renewed; break;
      case Identity::replaced: out[i] = spi::RenewStatus::not_held; break;
      case Identity::unknown: out[i] = spi::RenewStatus::failed; break;
    }
  }
}

}  // namespace dlock::file
