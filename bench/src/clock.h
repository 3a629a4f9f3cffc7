// Time and CPU readings used by every measurement.
#pragma once

#include <sys/resource.h>
#include <time.h>

#include <cstdint>

namespace dlock_bench {

// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of this host, so one
// process can stamp a time that another process subtracts from its own reading.
inline std::uint64_t mono_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

// user + system CPU time of a rusage, in seconds.
inline double cpu_seconds(const rusage& ru) noexcept {
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPU seconds (user + system) this process has used so far, all threads.
inline double process_cpu_seconds() noexcept {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return cpu_seconds(ru);
}

}  // namespace dlock_bench
