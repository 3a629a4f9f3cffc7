// FileHeldLock: a granted file:// lock, owning the open file description that holds it.
#pragma once

#include <unistd.h>

#include <mutex>
#include <string>

#include "dlock/spi/held_lock.h"
#include "unique_fd.h"

namespace dlock::file {

// Thread safety: `mu` guards `fd` (release and the watchdog's check may run concurrently).
class FileHeldLock final : public spi::HeldLock {
 public:
  FileHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
               UniqueFd held_fd, std::string lock_path)
      : HeldLock(std::move(name), mode, std::move(owner_key), token, Clock::time_point::max()),
        fd(std::move(held_fd)),
        path(std::move(lock_path)),
        pid(::getpid()) {}

  std::mutex mu;
  UniqueFd fd;  // holds Range::main; invalid once released
  const std::string path;
  // The process that took the lock. A child created by fork() shares the open description:
  // unlocking it there would free the parent's lock.
  const pid_t pid;
};

}  // namespace dlock::file
