// dlock-bench: measures one lock service in one run against its floor and prints a table.
// See bench/README.md.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "contender.h"
#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/uri.h"
#include "floor.h"
#include "floor_file_handoff.h"
#include "floor_redis_handoff.h"
#include "loop.h"
#include "peers.h"
#include "postgres_extra.h"
#include "report.h"
#include "sections.h"
#include "settle.h"

namespace {

using namespace dlock_bench;

// Runs one section, turning its failure into a reported error so the others still run.
template <class F>
void section(Report& report, const std::string& id, const std::string& title, F&& f) {
  std::cerr << "dlock-bench: (" << id << ") " << title << "...\n";
  try {
    f();
  } catch (const std::exception& e) {
    report.add_error(id, e.what());
  }
}

int run(const Settings& s) {
  dlock::Uri uri;
  try {
    uri = dlock::Uri::parse(s.uri);
  } catch (const dlock::Error& e) {
    std::cerr << "dlock-bench: " << e.what() << "\n";
    return 2;
  }
  Report report(uri.redacted(), uri.scheme, s.quick);
  std::shared_ptr<dlock::ILockProvider> provider;
  try {
    provider = dlock::open(s.uri);
  } catch (const std::exception& e) {
    std::cerr << "dlock-bench: cannot open " << uri.redacted() << ": " << e.what() << "\n";
    return 1;
  }
  try {
    settle(*provider);
  } catch (const std::exception& e) {
    std::cerr << "dlock-bench: no grant from " << uri.redacted() << ": " << e.what() << "\n";
    return 1;
  }
  auto wants = [&](char c) { return s.sections.find(c) != std::string::npos; };

  std::optional<double> ping_p50;
  if (wants('a')) {
    section(report, "a", "floor and uncontended acquire + release", [&] {
      ping_p50 = run_uncontended(uri, *provider, make_floor(uri), s, report);
    });
    if (s.peers) section(report, "a", "peer libraries", [&] { run_peers(uri, s, report); });
  }
  if (wants('b')) {
    if (!ping_p50) {
      // (b) alone still needs the PING of the same run.
      section(report, "b", "PING floor", [&] {
        Floor f = make_floor(uri);
        if (f.ping) ping_p50 = time_loop(s.warmup, std::min(s.iterations, 2000), s.loop_cap, f.ping).p50_us();
      });
    }
    std::vector<int> counts = s.procs.empty() ? std::vector<int>{s.workers} : s.procs;
    for (int n : counts) {
      Settings sn = s;
      sn.workers = n;
      std::optional<HandoffFloor> handoff_floor;
      if (uri.scheme == "file") {
        section(report, "b", "F_OFD_SETLKW hand-off floor",
                [&] { handoff_floor = run_file_handoff_floor(uri, sn, report); });
      }
      std::optional<RedisHandoffFloor> redis_floor;
      if (uri.scheme == "redis") {
        section(report, "b", "BLPOP/LPUSH hand-off floor",
                [&] { redis_floor = run_redis_handoff_floor(uri, sn, RedisFloorKind::blpop, report); });
        section(report, "b", "SET NX spin floor",
                [&] { run_redis_handoff_floor(uri, sn, RedisFloorKind::spin, report); });
      }
      section(report, "b", "contended handoff", [&] { run_contended(s.uri, provider, ping_p50, sn, report); });
      if (redis_floor) {
        section(report, "b", "hand-off versus the BLPOP floor", [&] { add_redis_handoff_ratios(*redis_floor, report); });
      }
      if (handoff_floor) {
        section(report, "b", "hand-off versus floor", [&] { add_handoff_floor_ratios(*handoff_floor, report); });
      }
#ifdef DLOCK_BENCH_MYSQL
      if (uri.scheme == "mysql" || uri.scheme == "mariadb") {
        section(report, "b", "GET_LOCK hand-off floor", [&] { run_mysql_handoff_floor(uri, sn, report); });
      }
#endif
#ifndef DLOCK_BENCH_NO_POSTGRES
      if (uri.scheme == "postgres" || uri.scheme == "postgresql") {
        section(report, "b", "postgres native hand-off floor and peers", [&] { run_postgres_extra(uri, sn, report); });
      }
#endif
    }
  }
  if (wants('c')) section(report, "c", "re-entry", [&] { run_reentry(*provider, s, report); });
  provider.reset();  // (d) counts server commands: nothing else of ours may talk meanwhile
  if (wants('d')) section(report, "d", "watchdog", [&] { run_watchdog(s.uri, s, report); });

  report.print_markdown(std::cout);
  if (s.json_path) {
    std::ofstream out(*s.json_path);
    report.write_json(out);
    if (!out) {
      std::cerr << "dlock-bench: cannot write " << *s.json_path << "\n";
      return 1;
    }
  }
  if (report.has_errors()) return 1;
  return s.strict && report.has_misses() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  ParsedArgs parsed;
  try {
    parsed = parse_args(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "dlock-bench: " << e.what() << "\n\n" << usage();
    return 2;
  }
  if (parsed.help) {
    std::cout << usage();
    return 0;
  }
  if (parsed.worker) return worker_main(*parsed.worker);
  try {
    return run(*parsed.settings);
  } catch (const std::exception& e) {
    std::cerr << "dlock-bench: " << e.what() << "\n";
    return 1;
  }
}
