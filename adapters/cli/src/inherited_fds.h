// The descriptors dlock was started with, which CMD must get as they are, and no other.
#pragma once

#include <vector>

namespace dlock::cli {

// Thread safety: immutable after construction.
class InheritedFds {
 public:
  // Lists the descriptors open now (/proc/self/fd). Construct it before anything of dlock's
  // opens one (the lock service's connection). Never throws for /proc: without it, nothing
  // is known and close_others_on_exec() does nothing.
  InheritedFds();

  // Marks every open descriptor that was not inherited close-on-exec (client libraries open
  // sockets and pipes without O_CLOEXEC), so that a process spawned next gets none of them.
  // A descriptor a library thread opens between this call and the spawn (a reconnect) can
  // still slip through. Never throws.
  void close_others_on_exec() const noexcept;

 private:
  bool known_ = false;
  std::vector<int> fds_;  // sorted
};

}  // namespace dlock::cli
