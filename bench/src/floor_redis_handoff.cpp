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
// The figures are counted exactly as dlock's contenders count them (contender.cpp): a
// hand-off is an acquisition right after another process's release; its latency is the new
// holder's clock minus the stamp the releaser wrote just before releasing.
#include <hiredis/hiredis.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_lua.h"
#include "clock.h"
#include "floor_redis_handoff.h"
#include "redis_wire.h"
#include "sections.h"
#include "shared_region.h"
#include "stats.h"

namespace dlock_bench {
namespace {

constexpr std::uint64_t kSamples = 1u << 20;  // per worker; later hand-offs are counted only

struct alignas(64) FloorSlot {
  std::atomic<std::uint32_t> ready;
  std::atomic<std::uint32_t> failed;
  std::atomic<std::uint64_t> acquisitions;
  std::atomic<std::uint64_t> handoffs;
  std::atomic<std::uint64_t> samples;
};

struct FloorRegion {
  alignas(64) std::atomic<std::uint64_t> release_ns;
  std::atomic<std::int32_t> last_holder;
  alignas(64) std::atomic<std::uint32_t> holding;
  std::atomic<std::uint64_t> violations;
  alignas(64) std::atomic<std::uint32_t> go;
  std::atomic<std::uint32_t> stop;
  FloorSlot slots[kMaxWorkers];
};

std::uint32_t* samples_of(void* base, int index) {
  auto* first = reinterpret_cast<std::uint32_t*>(static_cast<char*>(base) + sizeof(FloorRegion));
  return first + static_cast<std::size_t>(index) * kSamples;
}

// Counts one acquisition (and its hand-off latency) the way contender.cpp does.
void count(FloorRegion& r, void* base, int index, std::uint64_t acquired) {
  FloorSlot& slot = r.slots[index];
  const std::int32_t last = r.last_holder.load();
  const std::uint64_t released = r.release_ns.load();
  slot.acquisitions.fetch_add(1, std::memory_order_relaxed);
  if (last >= 0 && last != index) {
    slot.handoffs.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t n = slot.samples.load(std::memory_order_relaxed);
    if (n < kSamples) {
      std::uint64_t ns = acquired - released;
      samples_of(base, index)[n] = ns > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(ns);
      slot.samples.store(n + 1, std::memory_order_relaxed);
    }
  }
}

// The child's whole life. Its own connection, opened after the fork.
[[noreturn]] void worker(void* base, int index, const dlock::Uri& uri, RedisFloorKind kind, const std::string& key,
                         const std::string& sha) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto& r = *static_cast<FloorRegion*>(base);
  FloorSlot& slot = r.slots[index];
  try {
    RedisWire wire(uri);
    const std::string me = std::to_string(index);
    slot.ready.store(1);
    while (r.go.load() == 0 && r.stop.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    for (;;) {
      if (kind == RedisFloorKind::blpop) {
        // A 1 s timeout only so that a stopped run ends even if the token were lost.
        ReplyPtr got = wire.command({"BLPOP", key, "1"});
        if (got->type != REDIS_REPLY_ARRAY) {
          if (r.stop.load() != 0) ::_exit(0);
          continue;
        }
      } else {
        ReplyPtr set = wire.command({"SET", key, me, "NX", "PX", "30000"});
        if (set->type != REDIS_REPLY_STATUS) {
          if (r.stop.load() != 0) ::_exit(0);
          continue;
        }
      }
      const std::uint64_t acquired = mono_ns();
      if (r.holding.fetch_add(1) != 0) r.violations.fetch_add(1);
      const bool stopping = r.stop.load() != 0;
      if (!stopping) count(r, base, index, acquired);
      r.last_holder.store(index);
      r.holding.fetch_sub(1);
      r.release_ns.store(mono_ns());
      if (kind == RedisFloorKind::blpop) {
        wire.command_ok({"LPUSH", key, "t"});  // also when stopping: the next one sees stop
      } else {
        wire.command_ok({"EVALSHA", sha, "1", key, me});
      }
      if (stopping) ::_exit(0);
    }
  } catch (...) {
    slot.failed.store(1);
    ::_exit(1);
  }
}

struct Mapping {
  void* base;
  std::size_t size;
  ~Mapping() { ::munmap(base, size); }
};

struct Children {
  std::vector<pid_t> pids;
  ~Children() {  // only after a failure: the normal path reaps them
    for (pid_t pid : pids) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

double metric(const Row& row, const std::string& key, double fallback = -1) {
  for (const auto& [k, v] : row.metrics) {
    if (k == key) return v;
  }
  return fallback;
}

}  // namespace

RedisHandoffFloor run_redis_handoff_floor(const dlock::Uri& uri, const Settings& settings, RedisFloorKind kind,
                                          Report& report) {
  const int workers = settings.workers;
  if (workers < 2 || workers > kMaxWorkers) throw std::runtime_error("hand-off floor: bad worker count");
  const bool blpop = kind == RedisFloorKind::blpop;
  RedisWire control(uri);
  const std::string key = bench_name(blpop ? "floor-blpop" : "floor-spin");
  std::string sha;
  if (!blpop) {
    ReplyPtr loaded = control.command_ok({"SCRIPT", "LOAD", kCompareAndDeleteLua});
    sha.assign(loaded->str, loaded->len);
  }
  control.command({"DEL", key});

  const std::size_t size = sizeof(FloorRegion) + static_cast<std::size_t>(workers) * kSamples * sizeof(std::uint32_t);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::runtime_error(std::string("hand-off floor: mmap: ") + std::strerror(errno));
  Mapping mapping{base, size};
  auto& r = *new (base) FloorRegion{};
  r.last_holder.store(-1);

  Children children;
  for (int i = 0; i < workers; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("hand-off floor: fork: ") + std::strerror(errno));
    if (pid == 0) worker(base, i, uri, kind, key, sha);
    children.pids.push_back(pid);
  }
  const std::uint64_t start_deadline = mono_ns() + 15'000'000'000ull;
  for (;;) {
    int ready = 0;
    for (int i = 0; i < workers; ++i) {
      if (r.slots[i].failed.load() != 0) throw std::runtime_error("hand-off floor: a worker could not connect");
      ready += r.slots[i].ready.load() != 0 ? 1 : 0;
    }
    if (ready == workers) break;
    if (mono_ns() > start_deadline) throw std::runtime_error("hand-off floor: workers not ready within 15 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const CommandCounts before = read_command_counts(control);
  const std::uint64_t t_go = mono_ns();
  r.go.store(1);
  if (blpop) control.command_ok({"LPUSH", key, "t"});  // the one token
  std::this_thread::sleep_for(settings.contended);
  r.stop.store(1);
  const std::uint64_t t_stop = mono_ns();
  const CommandDelta commands = read_command_counts(control) - before;

  double cpu = 0;
  bool all_ok = true;
  for (pid_t pid : children.pids) {
    int status = 0;
    rusage ru{};
    if (::wait4(pid, &status, 0, &ru) == pid) cpu += cpu_seconds(ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) all_ok = false;
  }
  children.pids.clear();
  control.command({"DEL", key});
  if (!all_ok) throw std::runtime_error("hand-off floor: a worker process failed");

  const double seconds = static_cast<double>(t_stop - t_go) / 1e9;
  std::uint64_t handoffs = 0, acquisitions = 0;
  Samples lat;
  for (int i = 0; i < workers; ++i) {
    handoffs += r.slots[i].handoffs.load();
    acquisitions += r.slots[i].acquisitions.load();
    const std::uint32_t* smp = samples_of(base, i);
    for (std::uint64_t k = 0, n = r.slots[i].samples.load(); k < n; ++k) lat.add(smp[k]);
  }
  RedisHandoffFloor f;
  f.workers = workers;
  f.handoffs_per_s = static_cast<double>(handoffs) / seconds;
  f.acquisitions_per_s = static_cast<double>(acquisitions) / seconds;
  f.cpu_s_per_1000_handoffs = handoffs ? cpu / (static_cast<double>(handoffs) / 1000.0) : 0;
  f.commands_per_acquisition = acquisitions ? commands.total / static_cast<double>(acquisitions) : 0;
  if (!lat.empty()) f.p50_us = lat.p50_us();
  const double by_releaser =
      acquisitions ? 100.0 * static_cast<double>(acquisitions - handoffs) / static_cast<double>(acquisitions) : 0;

  Row row;
  row.section = "b";
  row.what = std::string("floor: ") + (blpop ? "BLPOP/LPUSH FIFO token hand-off" : "SET NX PX spin (reference)") +
             ", " + std::to_string(workers) + " processes (raw hiredis)";
  if (!lat.empty()) {
    row.p50_us = lat.p50_us();
    row.p99_us = lat.p99_us();
  }
  row.other = fmt_count(f.handoffs_per_s) + " handoffs/s; " + fmt_count(f.acquisitions_per_s) + " acquisitions/s; " +
              fmt_fixed(by_releaser, 1) + "% re-acquired by the releaser; CPU per 1,000 handoffs " +
              fmt_fixed(f.cpu_s_per_1000_handoffs, 3) + " s; commands per acquisition " +
              fmt_fixed(f.commands_per_acquisition, 1) + "; overlaps " + std::to_string(r.violations.load());
  row.verdict = r.violations.load() == 0 ? Verdict::info : Verdict::fail;
  row.metrics = {{"handoffs_per_s", f.handoffs_per_s},
                 {"acquisitions_per_s", f.acquisitions_per_s},
                 {"cpu_s_per_1000_handoffs", f.cpu_s_per_1000_handoffs},
                 {"commands_per_acquisition", f.commands_per_acquisition},
                 {"overlaps", static_cast<double>(r.violations.load())}};
  if (f.p50_us) row.metrics.emplace_back("p50_us", *f.p50_us);
  report.add(std::move(row));
  return f;
}

void add_redis_handoff_ratios(const RedisHandoffFloor& floor, Report& report) {
  const std::string who = ", " + std::to_string(floor.workers) + " processes";
  double rate = -1, cpu = -1, cmds = -1;
  std::optional<double> p50;
  for (const Row& row : report.rows()) {
    if (row.section != "b" || row.what.find(who) == std::string::npos) continue;
    if (row.what.starts_with("handoffs per second")) rate = metric(row, "handoffs_per_s");
    if (row.what.starts_with("handoff latency")) p50 = row.p50_us;
    if (row.what.starts_with("CPU per 1,000 handoffs")) {
      cpu = metric(row, "cpu_s_per_1000_handoffs");
      cmds = metric(row, "commands_incl_scripts_per_acquisition");
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
            " s (" + fmt_fixed(ratio(cpu, floor.cpu_s_per_1000_handoffs), 2) + " x)";
  r.metrics = {{"ratio_to_floor_handoffs_per_s", r_rate},
               {"ratio_to_floor_cpu_per_1000_handoffs", ratio(cpu, floor.cpu_s_per_1000_handoffs)},
               {"commands_per_acquisition", cmds},
               {"floor_commands_per_acquisition", floor.commands_per_acquisition}};
  if (p50 && floor.p50_us) r.metrics.emplace_back("ratio_to_floor_p50", *p50 / *floor.p50_us);
  report.add(std::move(r));
}

}  // namespace dlock_bench
