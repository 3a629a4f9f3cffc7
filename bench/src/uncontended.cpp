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

namespace {

// Client CPU per iteration of a timed op, in µs.
double cpu_us_per_iteration(const Timed& t) {
  return t.samples.empty() ? 0 : t.cpu_s * 1e6 / static_cast<double>(t.samples.size());
}

// Redis: the server's main-thread CPU per call of `op`, in µs (untimed stint; server-wide).
double server_cpu_us(RedisWire& wire, const std::function<void()>& op, int n) {
  const CommandCounts before = read_command_counts(wire);
  for (int i = 0; i < n; ++i) op();
  const CommandDelta d = read_command_counts(wire) - before;
  return d.server_cpu_s * 1e6 / n;
}

}  // namespace

std::optional<double> run_uncontended(const dlock::Uri& uri, dlock::ILockProvider& provider, const Floor& floor,
                                      const Settings& settings, Report& report) {
  const std::string name = bench_name("uncontended");
  std::function<void()> dlock_op = [&] {
    std::optional<dlock::Lease> lease = provider.try_lock(name);
    if (!lease) throw std::runtime_error("uncontended try_lock found '" + name + "' busy");
    if (!lease->release()) throw std::runtime_error("uncontended release reported not held");
  };
  // The same with an explicit lease: no watchdog renewal, to show what the watchdog costs.
  const std::string name_lease = bench_name("uncontended-lease");
  dlock::AcquireOptions with_lease;
  with_lease.lease = std::chrono::milliseconds(30000);
  std::function<void()> dlock_lease_op = [&] {
    std::optional<dlock::Lease> lease = provider.try_lock(name_lease, dlock::Wait::try_once(), with_lease);
    if (!lease) throw std::runtime_error("uncontended try_lock found '" + name_lease + "' busy");
    if (!lease->release()) throw std::runtime_error("uncontended release reported not held");
  };
  std::vector<std::function<void()>> ops;
  if (floor.ping) ops.push_back(floor.ping);
  if (floor.lock) ops.push_back(floor.lock);
  ops.push_back(dlock_op);
  ops.push_back(dlock_lease_op);
  std::vector<Timed> t = time_interleaved(ops, settings.warmup, settings.iterations, settings.loop_cap);

  // Where the time goes, on redis: round trips (MONITOR) and server CPU, both untimed.
  std::optional<Traffic> traffic;
  std::optional<double> floor_server_us, dlock_server_us;
  const int n = std::min(settings.iterations, 1000);
  if (uri.scheme == "redis") {
    {
      RedisMonitor monitor(uri);  // MONITOR slows the server: never while timing
      for (int i = 0; i < std::min(n, 200); ++i) dlock_op();
      traffic = monitor.stop();
    }
    RedisWire wire(uri);
    if (floor.lock) floor_server_us = server_cpu_us(wire, floor.lock, n);
    dlock_server_us = server_cpu_us(wire, dlock_op, n);
  }

  std::size_t k = 0;
  std::optional<double> ping_p50, floor_p50;
  if (floor.ping) {
    ping_p50 = t[k].samples.p50_us();
    report.add(latency_row("a", floor.ping_label, t[k++].samples));
  }
  if (floor.lock) {
    floor_p50 = t[k].samples.p50_us();
    Row f = latency_row("a", floor.lock_label, t[k].samples);
    f.other += "; client CPU " + fmt_us(cpu_us_per_iteration(t[k])) + " µs/iteration";
    f.metrics.emplace_back("client_cpu_us_per_iteration", cpu_us_per_iteration(t[k]));
    if (floor_server_us) {
      f.other += ", server CPU " + fmt_us(*floor_server_us) + " µs";
      f.metrics.emplace_back("server_cpu_us_per_iteration", *floor_server_us);
    }
    report.add(std::move(f));
    ++k;
  }
  Row r = latency_row("a", "dlock try_lock + release (uncontended)", t[k].samples);
  r.other += "; client CPU " + fmt_us(cpu_us_per_iteration(t[k])) + " µs/iteration";
  r.metrics.emplace_back("client_cpu_us_per_iteration", cpu_us_per_iteration(t[k]));
  if (dlock_server_us) {
    r.other += ", server CPU " + fmt_us(*dlock_server_us) + " µs";
    r.metrics.emplace_back("server_cpu_us_per_iteration", *dlock_server_us);
  }
  if (traffic) {
    const double per = static_cast<double>(std::min(n, 200));
    r.other += "; requests/iteration " + fmt_fixed(static_cast<double>(traffic->requests) / per, 2) + " (" +
               traffic->top(4, per) + "), commands run inside scripts/iteration " +
               fmt_fixed(static_cast<double>(traffic->script_calls) / per, 2);
    r.metrics.emplace_back("requests_per_iteration", static_cast<double>(traffic->requests) / per);
    r.metrics.emplace_back("script_commands_per_iteration", static_cast<double>(traffic->script_calls) / per);
  }
  if (floor_p50) {
    double ratio = *r.p50_us / *floor_p50;
    r.versus = fmt_fixed(ratio, 2) + " x floor";
    r.metrics.emplace_back("ratio_to_floor_p50", ratio);
    if (floor.wire) {
      r.target = "p50 <= 1.10 x floor p50";
      r.verdict = ratio <= 1.10 ? Verdict::pass : Verdict::miss;
    }
  }
  report.add(std::move(r));
  Row e = latency_row("a", "dlock try_lock(lease=30s) + release (no watchdog)", t[k + 1].samples);
  e.other += "; client CPU " + fmt_us(cpu_us_per_iteration(t[k + 1])) + " µs/iteration";
  if (floor_p50) e.versus = fmt_fixed(*e.p50_us / *floor_p50, 2) + " x floor";
  report.add(std::move(e));
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
