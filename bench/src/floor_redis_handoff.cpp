// (b) for redis://: the server's own hand-off floors, and dlock's hand-off beside them.
//
// settings.workers processes (forked, raw hiredis, no dlock) hand over one lock for
// settings.contended:
//  - blpop: the lock is a token in a list. Every process blocks in BLPOP on it; the holder
//    pushes the token back with LPUSH, and the server gives it to the client that has been
//    blocked longest (FIFO). One command per acquisition and one per release, no script,
//    no polling: what a server-side queue costs at least.
//  - spin: SET key NX PX, retried at once until it answers OK, released with the
//    compare-and-delete script of (a)'s floor. Polls; for reference only.
// Counted by the shared harness (forked_handoff.h), exactly as dlock's contenders count.
#include <hiredis/hiredis.h>

#include <stdexcept>
#include <string>

#include "bench_lua.h"
#include "floor_redis_handoff.h"
#include "forked_handoff.h"
#include "redis_wire.h"
#include "sections.h"

namespace dlock_bench {
namespace {

// A worker's whole life. Its own connection, opened after the fork.
int redis_worker(HandoffWorker& w, int index, const dlock::Uri& uri, RedisFloorKind kind, const std::string& key,
                 const std::string& sha) {
  RedisWire wire(uri);
  const std::string me = std::to_string(index);
  w.ready_and_wait_for_start();
  for (;;) {
    if (kind == RedisFloorKind::blpop) {
      // A 1 s timeout only so that a stopped run ends even if the token were lost.
      ReplyPtr got = wire.command({"BLPOP", key, "1"});
      if (got->type != REDIS_REPLY_ARRAY) {
        if (w.stopped()) return 0;
        continue;
      }
    } else {
      ReplyPtr set = wire.command({"SET", key, me, "NX", "PX", "30000"});
      if (set->type != REDIS_REPLY_STATUS) {
        if (w.stopped()) return 0;
        continue;
      }
    }
    const bool over = w.acquired();
    w.releasing();
    if (kind == RedisFloorKind::blpop) {
      wire.command_ok({"LPUSH", key, "t"});  // also when over: the next one sees the stop
    } else {
      wire.command_ok({"EVALSHA", sha, "1", key, me});
    }
    if (over) return 0;
  }
}

}  // namespace

RedisHandoffFloor run_redis_handoff_floor(const dlock::Uri& uri, const Settings& settings, RedisFloorKind kind,
                                          Report& report) {
  const bool blpop = kind == RedisFloorKind::blpop;
  RedisWire control(uri);
  const std::string key = bench_name(blpop ? "floor-blpop" : "floor-spin");
  std::string sha;
  if (!blpop) {
    ReplyPtr loaded = control.command_ok({"SCRIPT", "LOAD", kCompareAndDeleteLua});
    sha.assign(loaded->str, loaded->len);
  }
  control.command({"DEL", key});

  CommandCounts before;
  ForkedHandoffRun run;
  run.workers = settings.workers;
  run.duration = std::chrono::duration_cast<std::chrono::milliseconds>(settings.contended);
  run.body = [&](HandoffWorker& w, int index) { return redis_worker(w, index, uri, kind, key, sha); };
  run.on_start = [&] {
    before = read_command_counts(control);
    if (blpop) control.command_ok({"LPUSH", key, "t"});  // the one token
  };
  run.describe_failure = [](std::uint32_t) { return std::string("could not connect or talk to the server"); };
  struct Cleanup {
    RedisWire& wire;
    const std::string& key;
    ~Cleanup() {
      try {
        wire.command({"DEL", key});
      } catch (...) {
      }
    }
  } cleanup{control, key};
  ForkedHandoffResult res = run_forked_handoff(run);
  const CommandDelta commands = read_command_counts(control) - before;

  RedisHandoffFloor f;
  f.workers = run.workers;
  f.handoffs_per_s = res.handoffs_per_s();
  f.acquisitions_per_s = res.acquisitions_per_s();
  f.cpu_s_per_1000_handoffs = res.cpu_s_per_1000_handoffs();
  f.commands_per_acquisition = res.acquisitions ? commands.total / static_cast<double>(res.acquisitions) : 0;
  if (!res.latency.empty()) f.p50_us = res.latency.p50_us();
  if (res.handoffs) f.server_cpu_us_per_handoff = commands.server_cpu_s * 1e6 / static_cast<double>(res.handoffs);

  Row row;
  row.section = "b";
  row.what = std::string("floor: ") + (blpop ? "BLPOP/LPUSH FIFO token hand-off" : "SET NX PX spin (reference)") +
             ", " + std::to_string(run.workers) + " processes (raw hiredis)";
  if (!res.latency.empty()) {
    row.p50_us = res.latency.p50_us();
    row.p99_us = res.latency.p99_us();
  }
  row.other = fmt_count(f.handoffs_per_s) + " handoffs/s; " + fmt_count(f.acquisitions_per_s) + " acquisitions/s; " +
              fmt_fixed(res.reacquired_by_releaser_percent(), 1) + "% re-acquired by the releaser; CPU per 1,000 handoffs " +
              fmt_fixed(f.cpu_s_per_1000_handoffs, 3) + " s; commands per acquisition " +
              fmt_fixed(f.commands_per_acquisition, 1) + "; server main thread CPU per handoff " +
              fmt_fixed(f.server_cpu_us_per_handoff, 1) + " µs; overlaps " + std::to_string(res.overlaps);
  row.verdict = res.overlaps == 0 ? Verdict::info : Verdict::fail;
  row.metrics = {{"handoffs_per_s", f.handoffs_per_s},
                 {"acquisitions_per_s", f.acquisitions_per_s},
                 {"cpu_s_per_1000_handoffs", f.cpu_s_per_1000_handoffs},
                 {"commands_per_acquisition", f.commands_per_acquisition},
                 {"server_cpu_us_per_handoff", f.server_cpu_us_per_handoff},
                 {"overlaps", static_cast<double>(res.overlaps)}};
  if (f.p50_us) row.metrics.emplace_back("p50_us", *f.p50_us);
  report.add(std::move(row));
  return f;
}

void add_redis_handoff_ratios(const RedisHandoffFloor& floor, Report& report) {
  const std::string who = ", " + std::to_string(floor.workers) + " processes";
  double rate = -1, cpu = -1, cmds = -1, server_us = -1;
  std::optional<double> p50;
  for (const Row& row : report.rows()) {
    if (row.section != "b" || row.what.find(who) == std::string::npos) continue;
    if (row.what.starts_with("handoffs per second")) rate = row.metric("handoffs_per_s");
    if (row.what.starts_with("handoff latency")) p50 = row.p50_us;
    if (row.what.starts_with("CPU per 1,000 handoffs")) {
      cpu = row.metric("cpu_s_per_1000_handoffs");
      cmds = row.metric("commands_incl_scripts_per_acquisition");
      server_us = row.metric("server_cpu_us_per_handoff");
    }
  }
  if (rate < 0 || floor.handoffs_per_s <= 0) throw std::runtime_error("no dlock hand-off figures to compare");
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const double r_rate = ratio(rate, floor.handoffs_per_s);
  Row r;
  r.section = "b";
  r.what = "dlock versus the BLPOP floor" + who;
  r.target = "handoffs/s >= 0.5 x floor";
  r.versus = fmt_fixed(r_rate, 2) + " x floor";
  r.verdict = r_rate >= 0.5 ? Verdict::pass : Verdict::miss;
  r.p50_us = p50;
  auto fmt_p50 = [](const std::optional<double>& v) { return v ? fmt_us(*v) + " µs" : std::string("-"); };
  r.other = "handoffs/s " + fmt_count(rate) + " vs " + fmt_count(floor.handoffs_per_s) + "; p50 " + fmt_p50(p50) +
            " vs " + fmt_p50(floor.p50_us) +
            (p50 && floor.p50_us ? " (" + fmt_fixed(*p50 / *floor.p50_us, 2) + " x)" : std::string()) +
            "; commands per acquisition " + fmt_fixed(cmds, 1) + " vs " + fmt_fixed(floor.commands_per_acquisition, 1) +
            "; CPU per 1,000 handoffs " + fmt_fixed(cpu, 3) + " s vs " + fmt_fixed(floor.cpu_s_per_1000_handoffs, 3) +
            " s (" + fmt_fixed(ratio(cpu, floor.cpu_s_per_1000_handoffs), 2) + " x); server main thread CPU per handoff " +
            fmt_fixed(server_us, 1) + " µs vs " + fmt_fixed(floor.server_cpu_us_per_handoff, 1) + " µs";
  r.metrics = {{"ratio_to_floor_handoffs_per_s", r_rate},
               {"ratio_to_floor_cpu_per_1000_handoffs", ratio(cpu, floor.cpu_s_per_1000_handoffs)},
               {"commands_per_acquisition", cmds},
               {"floor_commands_per_acquisition", floor.commands_per_acquisition},
               {"server_cpu_us_per_handoff", server_us},
               {"floor_server_cpu_us_per_handoff", floor.server_cpu_us_per_handoff}};
  if (p50 && floor.p50_us) r.metrics.emplace_back("ratio_to_floor_p50", *p50 / *floor.p50_us);
  report.add(std::move(r));
}

}  // namespace dlock_bench
