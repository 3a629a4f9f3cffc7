// Helpers shared by the file:// provider tests.
#pragma once

#include <fcntl.h>

#include <chrono>
#include <string>
#include <thread>

#include "lock_file.h"
#include "name_codec.h"
#include "range_lock.h"

namespace dlock::file::testing {

// What another description sees of `range` of the lock file of `name` in `dir`:
// F_UNLCK (free), F_RDLCK (shared holders only) or F_WRLCK (held exclusively).
inline int range_state(const std::string& dir, const std::string& name, Range range) {
  std::string path = dir + "/" + lock_file_name(name);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return F_UNLCK;
  struct flock probe {};
  probe.l_whence = SEEK_SET;
  probe.l_start = static_cast<off_t>(range);
  probe.l_len = 1;
  probe.l_type = F_RDLCK;  // conflicts only with an exclusive lock
  if (::fcntl(fd.get(), F_OFD_GETLK, &probe) != 0) return -1;
  if (probe.l_type != F_UNLCK) return F_WRLCK;
  probe.l_type = F_WRLCK;  // conflicts with any lock
  probe.l_start = static_cast<off_t>(range);
  probe.l_len = 1;
  if (::fcntl(fd.get(), F_OFD_GETLK, &probe) != 0) return -1;
  return probe.l_type == F_UNLCK ? F_UNLCK : F_RDLCK;
}

// Polls `pred` every millisecond for at most `limit`; returns its last value.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace dlock::file::testing
