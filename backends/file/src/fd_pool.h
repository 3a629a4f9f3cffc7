// FdPool: lock files kept open between holds, so that an acquire of a name used a moment
// ago costs no open() (a path walk, a file allocation) and its release no close().
//
// Each entry is an open file description holding no lock (an idle one): a hold always owns
// its description alone, so pooling never lets two holds share one. Idle descriptors are
// kept per file name, at most kPerName per name and kMaxIdle in all; a descriptor that does
// not fit is closed. (A forked child never takes from it: the core refuses a child the
// parent's provider.)
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lock_file.h"

namespace dlock::file {

class FdPool {
 public:
  static constexpr std::size_t kPerName = 4;
  static constexpr std::size_t kMaxIdle = 64;

  // An idle descriptor of `file_name`, or an invalid LockFd when none is kept. The caller
  // still checks, after locking, that the path names it (it may have been replaced).
  LockFd take(std::string_view file_name);

  // Keeps `file` (which holds no lock) for the next take() of `file_name`, or closes it.
  // Never throws.
  void put(std::string_view file_name, LockFd file) noexcept;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };

  std::mutex mu_;  // guards everything below
  std::unordered_map<std::string, std::vector<LockFd>, Hash, std::equal_to<>> idle_;
  std::size_t count_ = 0;
};

}  // namespace dlock::file
