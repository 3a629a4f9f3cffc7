// (a) dlock's uncontended acquire + release next to the floor, and (c) re-entry.
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include <functional>
#include <vector>

#include "loop.h"
#include "redis_monitor.h"
#include "redis_wire.h"
#include "sections.h"

namespace dlock_bench {

std::string bench_name(const std::string& purpose) {
  return "dlock-bench/" + std::to_string(getpid()) + "/" + purpose;
}

namespace {

Row latency_row(std::string section, std::string what, Samples& s) {
  Row r;
  r.section = std::move(section);
  r.what = std::move(what);
  r.p50_us = s.p50_us();
  r.p99_us = s.p99_us();
  r.other = fmt_count(static_cast<double>(s.size())) + " iterations";
  r.metrics = {{"p50_us", *r.p50_us}, {"p99_us", *r.p99_us}, {"iterations", static_cast<double>(s.size())}};
  return r;
}

}  // namespace

std::optional<double> run_uncontended(const dlock::Uri& uri, dlock::ILockProvider& provider, const Floor& floor,
                                      const Settings& settings, Report& report) {
  const std::string name = bench_name("uncontended");
  auto dlock_op = [&] {
    std::optional<dlock::Lease> lease = provider.try_lock(name);
    if (!lease) throw std::runtime_error("uncontended try_lock found '" + name + "' busy");
    if (!lease->release()) throw std::runtime_error("uncontended release reported not held");
  };
  std::vector<std::function<void()>> ops;
  if (floor.ping) ops.push_back(floor.ping);
  if (floor.lock) ops.push_back(floor.lock);
  ops.push_back(dlock_op);
  std::vector<Samples> s = time_interleaved(ops, settings.warmup, settings.iterations, settings.loop_cap);

  std::size_t k = 0;
  std::optional<double> ping_p50, floor_p50;
  if (floor.ping) {
    ping_p50 = s[k].p50_us();
    report.add(latency_row("a", floor.ping_label, s[k++]));
  }
  if (floor.lock) {
    floor_p50 = s[k].p50_us();
    report.add(latency_row("a", floor.lock_label, s[k++]));
  }
  Row r = latency_row("a", "dlock try_lock + release (uncontended)", s[k]);
  if (floor_p50) {
    double ratio = *r.p50_us / *floor_p50;
    r.versus = fmt_fixed(ratio, 2) + " x floor";
    r.metrics.emplace_back("ratio_to_floor_p50", ratio);
    if (floor.wire) {
      r.target = "p50 <= 1.10 x floor p50";
      r.verdict = ratio <= 1.10 ? Verdict::pass : Verdict::miss;
    }
  }
  if (uri.scheme == "redis") {
    // Round trips per iteration, counted untimed (MONITOR slows the server).
    const int n = std::min(settings.iterations, 200);
    RedisMonitor monitor(uri);
    for (int i = 0; i < n; ++i) dlock_op();
    const Traffic t = monitor.stop();
    const double per = static_cast<double>(n);
    r.other += "; requests/iteration " + fmt_fixed(static_cast<double>(t.requests) / per, 2) + " (" + t.top(4, per) +
               "), commands run inside scripts/iteration " + fmt_fixed(static_cast<double>(t.script_calls) / per, 2);
    r.metrics.emplace_back("requests_per_iteration", static_cast<double>(t.requests) / per);
    r.metrics.emplace_back("script_commands_per_iteration", static_cast<double>(t.script_calls) / per);
  }
  report.add(std::move(r));
  return ping_p50;
}

void run_reentry(dlock::ILockProvider& provider, const Settings& settings, Report& report) {
  if (!provider.capabilities().reentrant) {
    Row r;
    r.section = "c";
    r.what = "dlock re-entry";
    r.other = "provider is not reentrant";
    r.verdict = Verdict::na;
    report.add(std::move(r));
    return;
  }
  const std::string name = bench_name("reentry");
  std::optional<dlock::Lease> outer = provider.try_lock(name);
  if (!outer) throw std::runtime_error("re-entry: first try_lock found '" + name + "' busy");
  Samples s = time_loop(settings.warmup, settings.iterations, settings.loop_cap, [&] {
    std::optional<dlock::Lease> inner = provider.try_lock(name);
    if (!inner) throw std::runtime_error("re-entry: the holder could not acquire again");
    if (!inner->release()) throw std::runtime_error("re-entry: inner release reported not held");
  });
  if (!outer->held()) throw std::runtime_error("re-entry: the outer hold was lost");
  outer->release();
  report.add(latency_row("c", "dlock re-acquire + release by the holder", s));
}

}  // namespace dlock_bench
