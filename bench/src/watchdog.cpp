// (d) the watchdog holding many leases: what one renewal tick costs in round trips and CPU.
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "clock.h"
#include "dlock/duration.h"
#include "dlock/error.h"
#include "dlock/open.h"
#include "redis_monitor.h"
#include "redis_wire.h"
#include "sections.h"

namespace dlock_bench {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool has_param(const dlock::Uri& u, std::string_view key) {
  for (const auto& [k, v] : u.params)
    if (k == key) return true;
  return false;
}

// Opens `uri` with a short default lease (lease=…) so renewal ticks come often, when the
// backend accepts the parameter; otherwise as given.
std::shared_ptr<dlock::ILockProvider> open_short_lease(const std::string& uri, const dlock::Uri& parsed,
                                                       milliseconds lease, Report& report) {
  if (!has_param(parsed, "lease")) {
    std::string with = uri + (uri.find('?') == std::string::npos ? "?" : "&") + "lease=" +
                       dlock::format_duration(lease);
    try {
      return dlock::open(with);
    } catch (const dlock::Error& e) {
      if (e.code() != dlock::ErrorCode::invalid_argument) throw;
      report.add_note("(d) the URI takes no lease= parameter; the provider's default lease is used");
    }
  }
  return dlock::open(uri);
}

struct Counts {
  std::optional<CommandCounts> redis;
  double cpu = 0;
  std::uint64_t ns = 0;
};

Counts snapshot(RedisWire* wire) {
  Counts c;
  if (wire) c.redis = read_command_counts(*wire);
  c.cpu = process_cpu_seconds();
  c.ns = mono_ns();
  return c;
}

}  // namespace

void run_watchdog(const std::string& uri, const Settings& settings, Report& report) {
  const dlock::Uri parsed = dlock::Uri::parse(uri);
  auto provider = open_short_lease(uri, parsed, settings.watchdog_lease, report);
  const milliseconds lease = provider->capabilities().default_lease;
  const milliseconds tick = std::max(milliseconds(1), lease / 3);
  std::string what = "watchdog renewal tick, " + fmt_count(settings.leases) + " leases";
  if (tick > settings.watchdog_cap) {
    Row r;
    r.section = "d";
    r.what = what;
    r.other = "tick " + dlock::format_duration(tick) + " is longer than this run's budget";
    r.verdict = Verdict::na;
    report.add(std::move(r));
    return;
  }
  const int ticks = std::max<int>(1, std::min<int>(settings.watchdog_ticks, static_cast<int>(settings.watchdog_cap / tick)));

  std::unique_ptr<RedisWire> wire;
  if (parsed.scheme == "redis") wire = std::make_unique<RedisWire>(parsed);

  // Acquire every lease without an explicit lease time: the watchdog keeps them.
  std::vector<dlock::Lease> leases;
  leases.reserve(static_cast<std::size_t>(settings.leases));
  const std::uint64_t a0 = mono_ns();
  const std::uint64_t acquire_until = a0 + static_cast<std::uint64_t>(settings.loop_cap.count()) * 1'000'000;
  // A backend whose every hold pins a server connection from a bounded pool (mysql://) runs out
  // of them long before 10,000: the section then measures the leases it could hold and
  // says why it stopped, rather than failing as a whole.
  std::string stopped_because;
  std::uint64_t acquired_at = a0;
  for (int i = 0; i < settings.leases && mono_ns() < acquire_until; ++i) {
    std::string name = bench_name("watchdog/" + std::to_string(i));
    std::optional<dlock::Lease> l;
    try {
      l = provider->try_lock(name);
    } catch (const dlock::Error& e) {
      if (leases.empty() || e.code() != dlock::ErrorCode::unavailable) throw;
      stopped_because = e.what();
      break;
    }
    if (!l) throw std::runtime_error("watchdog: '" + name + "' was busy");
    leases.push_back(std::move(*l));
    acquired_at = mono_ns();
  }
  const double acquire_s = static_cast<double>(acquired_at - a0) / 1e9;  // not the refused one's wait
  {
    Row r;
    r.section = "d";
    r.what = "acquire " + fmt_count(static_cast<double>(leases.size())) + " distinct names (watchdog mode)";
    r.other = fmt_fixed(acquire_s, 2) + " s, " + fmt_count(static_cast<double>(leases.size()) / acquire_s) +
              " acquires/s";
    if (!stopped_because.empty())
      r.other += " (stopped before " + fmt_count(settings.leases) + ": " + stopped_because + ")";
    else if (leases.size() < static_cast<std::size_t>(settings.leases))
      r.other += " (stopped at the time cap before " + fmt_count(settings.leases) + ")";
    r.metrics = {{"seconds", acquire_s}};
    report.add(std::move(r));
  }

  what = "watchdog renewal tick, " + fmt_count(static_cast<double>(leases.size())) + " leases";
  // Measure whole ticks, counting renewals as each lease's expiry moves.
  std::vector<Clock::time_point> seen;
  seen.reserve(leases.size());
  for (const auto& l : leases) seen.push_back(l.expires_at());
  std::uint64_t renewals = 0;
  std::unique_ptr<RedisMonitor> monitor;
  if (wire) monitor = std::make_unique<RedisMonitor>(parsed);
  const Counts c0 = snapshot(wire.get());
  const std::uint64_t end = c0.ns + static_cast<std::uint64_t>((tick * ticks).count()) * 1'000'000;
  const auto scan_every = std::max(milliseconds(1), tick / 20);
  for (;;) {
    std::this_thread::sleep_for(scan_every);
    for (std::size_t i = 0; i < leases.size(); ++i) {
      Clock::time_point e = leases[i].expires_at();
      if (e != seen[i]) {
        ++renewals;
        seen[i] = e;
      }
    }
    if (mono_ns() >= end) break;
  }
  const Counts c1 = snapshot(wire.get());
  std::optional<Traffic> traffic;
  if (monitor) traffic = monitor->stop();
  std::size_t lost = 0;
  for (const auto& l : leases)
    if (!l.held()) ++lost;

  const double window_ticks = static_cast<double>(c1.ns - c0.ns) / 1e6 / static_cast<double>(tick.count());
  // Our MONITOR reader's CPU is not the watchdog's.
  const double cpu_ms_per_tick = (c1.cpu - c0.cpu - (traffic ? traffic->reader_cpu_s : 0)) * 1000.0 / window_ticks;
  const double expected = static_cast<double>(leases.size()) * window_ticks;
  Row r;
  r.section = "d";
  r.what = what;
  r.metrics = {{"tick_ms", static_cast<double>(tick.count())}, {"window_ticks", window_ticks},
               {"renewals", static_cast<double>(renewals)}, {"expected_renewals", expected},
               {"cpu_ms_per_tick", cpu_ms_per_tick}, {"lost", static_cast<double>(lost)}};
  r.other = "tick " + dlock::format_duration(tick) + "; " + fmt_count(static_cast<double>(renewals)) +
            " renewals seen (" + fmt_count(expected) + " expected) in " + fmt_fixed(window_ticks, 2) +
            " ticks; CPU " + fmt_fixed(cpu_ms_per_tick, 2) + " ms/tick";
  r.target = "<= 1 round trip per 100 leases (server read events)";
  if (provider->capabilities().liveness == dlock::Liveness::session) {
    r.other += " (session-based: the session keeps the locks, nothing to renew)";
  }
  if (c0.redis && c1.redis && traffic) {
    // Round trips: the requests clients sent (MONITOR), not the commands scripts ran inside
    // the server, which INFO commandstats counts as well.
    const CommandDelta d = *c1.redis - *c0.redis;
    const double requests = static_cast<double>(traffic->requests);
    const double per100 = renewals ? requests / static_cast<double>(renewals) * 100.0 : requests;
    r.other += "; requests/tick " + fmt_fixed(requests / window_ticks, 1) + " (" + traffic->top(3, window_ticks) +
               "); commands run/tick incl. inside scripts " + fmt_fixed(d.total / window_ticks, 0) + "; server-wide";
    r.metrics.emplace_back("requests_per_tick", requests / window_ticks);
    r.metrics.emplace_back("commands_per_tick_incl_scripts", d.total / window_ticks);
    r.metrics.emplace_back("scripts_per_tick", d.scripts / window_ticks);
    r.metrics.emplace_back("requests_per_100_leases", per100);
    // Round trips: the server's read events (a pipelined batch arrives in one or a few), an
    // upper bound on the round trips clients started, whatever call the client sends with.
    const double rt_per100 = renewals ? d.reads / static_cast<double>(renewals) * 100.0 : d.reads;
    r.other += "; server read events/tick " + fmt_fixed(d.reads / window_ticks, 1) +
               " (>= round trips: pipelined requests share one)";
    r.versus = "<= " + fmt_fixed(rt_per100, 3) + " round trips per 100 leases (" + fmt_fixed(per100, 3) +
               " requests)";
    r.verdict = renewals > 0 && rt_per100 <= 1.0 ? Verdict::pass : Verdict::miss;
    r.metrics.emplace_back("round_trips_per_100_leases_upper_bound", rt_per100);
  } else {
    r.versus = "round trips n/a";
    r.verdict = Verdict::na;
  }
  if (lost) {
    r.verdict = Verdict::fail;
    r.other += "; " + std::to_string(lost) + " leases LOST";
  }
  report.add(std::move(r));

  const std::uint64_t r0 = mono_ns();
  std::size_t not_held = 0;
  for (auto& l : leases) {
    if (!l.release()) ++not_held;
    l = dlock::Lease{};  // drop the hold at once, as a scope would
  }
  const double release_s = static_cast<double>(mono_ns() - r0) / 1e9;
  Row rel;
  rel.section = "d";
  rel.what = "release " + fmt_count(static_cast<double>(leases.size())) + " leases";
  rel.other = fmt_fixed(release_s, 2) + " s, " + fmt_count(static_cast<double>(leases.size()) / release_s) +
              " releases/s" + (not_held ? "; " + std::to_string(not_held) + " reported not held" : "");
  rel.metrics = {{"seconds", release_s}};
  report.add(std::move(rel));
}

}  // namespace dlock_bench
