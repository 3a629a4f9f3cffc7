#include "args.h"

#include <algorithm>
#include <stdexcept>

#include "dlock/duration.h"
#include "dlock/error.h"

namespace dlock_bench {

const char* usage() {
  return R"(usage: dlock-bench --uri URI [options]

Measures one lock service in one run and prints a Markdown table:
  (a) the floor (raw client round trips) next to dlock's uncontended acquire+release
  (b) contended handoff between --workers processes on one name
  (c) re-entry cost
  (d) the watchdog holding --leases leases: round trips and CPU per renewal tick

options:
  --uri URI            mem://, file:///dir, redis://host:port[/db] ... (required)
  --json FILE          also write the results as JSON
  --quick              short run for CI (~10 s)
  --strict             exit 1 when a target is missed
  --only SECTIONS      e.g. "ab" (default "abcd")
  --iterations N       timed iterations of each latency loop (default 20000; quick 2000)
  --workers N          contenders in (b) (default 4)
  --procs N,N,...      run (b) once per contender count, e.g. 2,4,8 (default: --workers)
  --contended DUR      length of (b) (default 10s; quick 2s)
  --leases N           leases in (d) (default 10000; quick 1000)
  --watchdog-lease DUR default lease asked for (d) through the URI's lease= (default 3s)
  --no-peers           do not run peer libraries (redis-py) for comparison
exit: 0 measured, 1 a measurement failed (or --strict and a target missed), 2 bad usage
)";
}

namespace {

int parse_int(const std::string& flag, const std::string& value, int min, int max) {
  try {
    std::size_t used = 0;
    long v = std::stol(value, &used);
    if (used == value.size() && v >= min && v <= max) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(flag + " wants an integer in [" + std::to_string(min) + ", " +
                              std::to_string(max) + "], got '" + value + "'");
}

std::chrono::milliseconds parse_dur(const std::string& flag, const std::string& value) {
  try {
    return dlock::parse_duration(value);
  } catch (const dlock::Error& e) {
    throw std::invalid_argument(flag + ": " + e.message());
  }
}

}  // namespace

ParsedArgs parse_args(const std::vector<std::string>& args) {
  ParsedArgs out;
  Settings s;
  WorkerArgs w;
  bool worker = false, iterations_given = false, contended_given = false, leases_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      out.help = true;
      return out;
    } else if (a == "--uri") {
      s.uri = value();
    } else if (a == "--json") {
      s.json_path = value();
    } else if (a == "--quick") {
      s.quick = true;
    } else if (a == "--strict") {
      s.strict = true;
    } else if (a == "--only") {
      s.sections = value();
      if (s.sections.empty() || s.sections.find_first_not_of("abcd") != std::string::npos)
        throw std::invalid_argument("--only wants letters of 'abcd', got '" + s.sections + "'");
    } else if (a == "--iterations") {
      s.iterations = parse_int(a, value(), 1, 10'000'000);
      iterations_given = true;
    } else if (a == "--workers") {
      s.workers = parse_int(a, value(), 2, 16);
    } else if (a == "--procs") {
      const std::string& list = value();
      s.procs.clear();
      for (std::size_t from = 0; from <= list.size();) {
        std::size_t comma = list.find(',', from);
        if (comma == std::string::npos) comma = list.size();
        s.procs.push_back(parse_int(a, list.substr(from, comma - from), 2, 16));
        from = comma + 1;
      }
    } else if (a == "--contended") {
      s.contended = parse_dur(a, value());
      contended_given = true;
    } else if (a == "--leases") {
      s.leases = parse_int(a, value(), 1, 1'000'000);
      leases_given = true;
    } else if (a == "--watchdog-lease") {
      s.watchdog_lease = parse_dur(a, value());
    } else if (a == "--no-peers") {
      s.peers = false;
    } else if (a == "--worker-contended") {
      worker = true;
    } else if (a == "--shm") {
      w.shm_path = value();
    } else if (a == "--index") {
      w.index = parse_int(a, value(), 0, 15);
    } else if (a == "--name") {
      w.name = value();
    } else {
      throw std::invalid_argument("unknown argument '" + a + "'");
    }
  }
  if (worker) {
    if (w.shm_path.empty() || w.name.empty())
      throw std::invalid_argument("--worker-contended needs --shm and --name");
    out.worker = w;
    return out;
  }
  if (s.uri.empty()) throw std::invalid_argument("--uri is required");
  if (s.quick) {
    if (!iterations_given) s.iterations = 2000;
    if (!contended_given) s.contended = std::chrono::milliseconds(2000);
    if (!leases_given) s.leases = 1000;
    s.warmup = 200;
    s.loop_cap = std::chrono::milliseconds(1500);
    s.watchdog_ticks = 1;
    s.watchdog_cap = std::chrono::milliseconds(3000);
  }
  s.warmup = std::min(s.warmup, std::max(1, s.iterations / 10));
  out.settings = s;
  return out;
}

}  // namespace dlock_bench
