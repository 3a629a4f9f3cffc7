// FileHeldLock: a granted file:// lock, owning the open file description that holds it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "dlock/spi/held_lock.h"
#include "lock_file.h"

namespace dlock::file {

// Thread safety: `mu` guards `file` (release and the watchdog's check may run concurrently).
class FileHeldLock final : public spi::HeldLock {
 public:
  FileHeldLock(std::string name, LockMode mode, std::string owner_key, std::uint64_t token,
               LockFd held, std::string lock_path, std::size_t file_name_at)
      : HeldLock(std::move(name), mode, std::move(owner_key), token, Clock::time_point::max()),
        file(std::move(held)),
        path(std::move(lock_path)),
        file_name_at_(file_name_at) {}

  // The lock file's name inside the directory (the pool's key).
  std::string_view file_name() const noexcept { return std::string_view(path).substr(file_name_at_); }

  std::mutex mu;
  LockFd file;  // holds Range::main; invalid once released
  const std::string path;

 private:
  const std::size_t file_name_at_;
};

}  // namespace dlock::file
