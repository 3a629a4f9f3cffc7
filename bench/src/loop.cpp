#include "loop.h"

#include <algorithm>

namespace dlock_bench {

std::vector<Timed> time_interleaved(const std::vector<std::function<void()>>& ops, int warmup, int iterations,
                                      std::chrono::milliseconds cap, int rounds) {
  std::vector<Timed> out(ops.size());
  for (std::size_t k = 0; k < ops.size(); ++k) {
    for (int i = 0; i < warmup; ++i) ops[k]();
    out[k].samples.reserve(static_cast<std::size_t>(iterations));
  }
  rounds = std::clamp(rounds, 1, iterations);
  const std::uint64_t stop_at =
      mono_ns() + static_cast<std::uint64_t>(cap.count()) * 1'000'000ull * static_cast<std::uint64_t>(ops.size());
  for (int r = 0; r < rounds; ++r) {
    // Spread the remainder so the total is exactly `iterations`.
    const int block = iterations / rounds + (r < iterations % rounds ? 1 : 0);
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const double cpu0 = process_cpu_seconds();
      for (int i = 0; i < block; ++i) {
        std::uint64_t t0 = mono_ns();
        ops[k]();
        out[k].samples.add(mono_ns() - t0);
      }
      out[k].cpu_s += process_cpu_seconds() - cpu0;
    }
    if (mono_ns() > stop_at) break;
  }
  return out;
}

}  // namespace dlock_bench
