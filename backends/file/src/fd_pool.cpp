#include "fd_pool.h"

#include <utility>

namespace dlock::file {

LockFd FdPool::take(std::string_view file_name) {
  std::lock_guard lock(mu_);
  auto it = idle_.find(file_name);
  if (it == idle_.end() || it->second.empty()) return {};
  LockFd file = std::move(it->second.back());
  it->second.pop_back();
  --count_;
  return file;
}

void FdPool::put(std::string_view file_name, LockFd file) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (count_ >= kMaxIdle) return;  // `file` closes on the way out
    auto it = idle_.find(file_name);
    if (it == idle_.end()) {
      // Names stay as keys when their last descriptor is taken (no allocation per hold):
      // sweep the empty ones when many names have come and gone.
      if (idle_.size() >= 4 * kMaxIdle) std::erase_if(idle_, [](auto& e) { return e.second.empty(); });
      it = idle_.emplace(std::string(file_name), std::vector<LockFd>{}).first;
    }
    if (it->second.size() >= kPerName) return;
    it->second.push_back(std::move(file));
    ++count_;
  } catch (...) {
    // Out of memory: the descriptor closes, the next acquire opens the file again.
  }
}

}  // namespace dlock::file
