#include "settle.h"

#include <chrono>
#include <iostream>
#include <string>

#include "sections.h"

namespace dlock_bench {

void settle(dlock::ILockProvider& provider) {
  const auto start = std::chrono::steady_clock::now();
  auto wait = dlock::Wait::for_duration(2 * provider.capabilities().default_lease);
  if (auto lease = provider.try_lock(bench_name("settle"), wait)) lease->release();
  const auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (waited > 0.1) {
    std::cerr << "dlock-bench: the first grant took " << waited
              << " s (a backend's pause after data loss, or a fresh dataset); not measured\n";
  }
}

}  // namespace dlock_bench
