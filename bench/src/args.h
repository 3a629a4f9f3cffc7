// The command line of dlock-bench.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock_bench {

// What one run measures and how long it may take.
struct Settings {
  std::string uri;                // the lock service, e.g. "redis://127.0.0.1:16379"
  std::optional<std::string> json_path;
  bool quick = false;             // CI: everything within ~10 s
  bool strict = false;            // exit 1 when a target is missed
  std::string sections = "abcd";  // which measurements to run
  int iterations = 20000;         // timed iterations of each latency loop (a, c)
  int warmup = 2000;              // untimed iterations before each loop
  std::chrono::milliseconds loop_cap{8000};        // a loop stops early after this long
  int workers = 4;                                 // (b) contenders
  std::vector<int> procs;                          // (b) run once per count (--procs 2,4,8); empty: workers
  std::chrono::milliseconds contended{10000};      // (b) measured window
  int leases = 10000;                              // (d) leases held by the watchdog
  std::chrono::milliseconds watchdog_lease{3000};  // (d) asked through the URI's lease= if accepted
  int watchdog_ticks = 3;                          // (d) renewal ticks in the measured window
  std::chrono::milliseconds watchdog_cap{25000};   // (d) longest measured window
  bool peers = true;                               // run peer libraries (redis-py) when present
};

// Worker mode: the process is one contender of (b), spawned by the parent run.
struct WorkerArgs {
  std::string shm_path;
  int index = 0;
  std::string name;
};

struct ParsedArgs {
  std::optional<Settings> settings;  // a measuring run
  std::optional<WorkerArgs> worker;  // a (b) worker (URI from the environment)
  bool help = false;
};

// Parses argv. Throws std::invalid_argument naming the bad argument.
ParsedArgs parse_args(const std::vector<std::string>& args);

// The usage text.
const char* usage();

// The environment variable through which a worker receives the URI (never argv, where
// `ps` would show a password).
inline constexpr const char* kWorkerUriEnv = "DLOCK_BENCH_WORKER_URI";

}  // namespace dlock_bench
