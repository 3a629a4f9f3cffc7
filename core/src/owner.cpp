#include "owner.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <random>

namespace dlock::detail {

std::string random_client_id() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  return std::string(buf, 32);
}

// A number drawn once per thread from a process-wide counter, never from std::thread::id:
// glibc gives a joined thread's id to the next thread it starts, which would make that
// thread a re-entrant holder of every lock the exited thread left held (a double grant).
std::string thread_owner() {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::string owner =
      "thread-" + std::to_string(next.fetch_add(1, std::memory_order_relaxed));
  return owner;
}

}  // namespace dlock::detail
