#include "dlock/spi/fork_guard.h"

#include <pthread.h>

#include <atomic>

namespace dlock::spi {
namespace {

std::atomic<std::uint64_t> generation{0};

void in_child() noexcept { generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

std::uint64_t fork_generation() noexcept {
  // If registration fails (ENOMEM), forked children go unnoticed: the same as without this.
  static const bool registered = ::pthread_atfork(nullptr, nullptr, &in_child) == 0;
  static_cast<void>(registered);
  return generation.load(std::memory_order_relaxed);
}

}  // namespace dlock::spi
