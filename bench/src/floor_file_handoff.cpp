// (b) for file://: the kernel's own hand-off floor, and dlock's hand-off against it.
//
// settings.workers processes (forked, no dlock in them) each open the same file and loop
// F_OFD_SETLKW (blocking, exclusive) -> stamp -> unlock on it for settings.contended: the
// kernel queues the waiters and wakes them at each unlock, with nothing in user space. The
// kernel does not hand the lock to a woken waiter: the waiter retries when it is scheduled,
// and a releaser that comes straight back usually takes the lock first (on 2 busy cores,
// ~99% of acquisitions are by the releaser), so hand-offs happen at preemptions. dlock's
// file:// waiters block the same way, so both show that behaviour. The figures are counted
// exactly as the dlock contenders count them (contender.cpp): a hand-off
// is an acquisition right after another worker's release; its latency is the new holder's
// clock minus the stamp the releaser wrote just before unlocking.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
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

#include "clock.h"
#include "floor_file_handoff.h"
#include "shared_region.h"
#include "stats.h"

namespace dlock_bench {
namespace {

constexpr std::uint64_t kSamples = 1u << 20;  // per worker; later hand-offs are counted only

struct alignas(64) FloorSlot {
  std::atomic<std::uint32_t> ready;
  std::atomic<std::uint64_t> acquisitions;
  std::atomic<std::uint64_t> handoffs;
  std::atomic<std::uint64_t> samples;
  std::atomic<std::uint32_t> failed;  // errno of a failed open or fcntl
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

// The child's whole life: only system calls and atomics (the parent has threads: no
// allocation, no locks after fork).
[[noreturn]] void worker(void* base, int index, const char* path) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto& r = *static_cast<FloorRegion*>(base);
  FloorSlot& slot = r.slots[index];
  std::uint32_t* samples = samples_of(base, index);
  int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    slot.failed.store(static_cast<std::uint32_t>(errno));
    ::_exit(1);
  }
  slot.ready.store(1);
  timespec pause{0, 200'000};
  while (r.go.load() == 0 && r.stop.load() == 0) ::nanosleep(&pause, nullptr);
  struct flock lock {};
  lock.l_whence = SEEK_SET;
  for (;;) {
    lock.l_type = F_WRLCK;
    while (::fcntl(fd, F_OFD_SETLKW, &lock) != 0) {
      if (errno != EINTR) {
        slot.failed.store(static_cast<std::uint32_t>(errno));
        ::_exit(1);
      }
    }
    const std::uint64_t acquired = mono_ns();
    if (r.holding.fetch_add(1) != 0) r.violations.fetch_add(1);
    const bool stopping = r.stop.load() != 0;
    const std::int32_t last = r.last_holder.load();
    const std::uint64_t released = r.release_ns.load();
    if (!stopping) {
      slot.acquisitions.fetch_add(1, std::memory_order_relaxed);
      if (last >= 0 && last != index) {
        slot.handoffs.fetch_add(1, std::memory_order_relaxed);
        std::uint64_t n = slot.samples.load(std::memory_order_relaxed);
        if (n < kSamples) {
          std::uint64_t ns = acquired - released;
          samples[n] = ns > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(ns);
          slot.samples.store(n + 1, std::memory_order_relaxed);
        }
      }
    }
    r.last_holder.store(index);
    r.holding.fetch_sub(1);
    r.release_ns.store(mono_ns());
    lock.l_type = F_UNLCK;
    ::fcntl(fd, F_OFD_SETLK, &lock);
    if (stopping) ::_exit(0);
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

double metric(const Row& row, const std::string& key) {
  for (const auto& [k, v] : row.metrics) {
    if (k == key) return v;
  }
  return 0;
}

}  // namespace

HandoffFloor run_file_handoff_floor(const dlock::Uri& uri, const Settings& settings, Report& report) {
  const int workers = settings.workers;
  if (workers < 2 || workers > kMaxWorkers) throw std::runtime_error("hand-off floor: bad worker count");
  const std::string path =
      (uri.path.empty() ? std::string(".") : uri.path) + "/dlock-bench-handoff." + std::to_string(::getpid());
  struct Unlink {
    const std::string& p;
    ~Unlink() { ::unlink(p.c_str()); }
  } unlink_guard{path};

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
    if (pid == 0) worker(base, i, path.c_str());
    children.pids.push_back(pid);
  }
  const std::uint64_t start_deadline = mono_ns() + 15'000'000'000ull;
  for (;;) {
    int ready = 0;
    for (int i = 0; i < workers; ++i) {
      if (r.slots[i].failed.load() != 0) {
        throw std::runtime_error("hand-off floor worker: " + std::string(std::strerror(static_cast<int>(r.slots[i].failed.load()))));
      }
      ready += r.slots[i].ready.load() != 0 ? 1 : 0;
    }
    if (ready == workers) break;
    if (mono_ns() > start_deadline) throw std::runtime_error("hand-off floor: workers not ready within 15 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::uint64_t t_go = mono_ns();
  r.go.store(1);
  std::this_thread::sleep_for(settings.contended);
  r.stop.store(1);
  const std::uint64_t t_stop = mono_ns();

  double cpu = 0;
  bool all_ok = true;
  for (pid_t pid : children.pids) {
    int status = 0;
    rusage ru{};
    if (::wait4(pid, &status, 0, &ru) == pid) cpu += cpu_seconds(ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) all_ok = false;
  }
  children.pids.clear();
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
  HandoffFloor f;
  f.handoffs_per_s = static_cast<double>(handoffs) / seconds;
  f.cpu_s_per_1000 = handoffs ? cpu / (static_cast<double>(handoffs) / 1000.0) : 0;
  f.acquisitions_per_s = static_cast<double>(acquisitions) / seconds;
  f.cpu_s_per_1000_acquisitions = acquisitions ? cpu / (static_cast<double>(acquisitions) / 1000.0) : 0;
  const double by_releaser =
      acquisitions ? 100.0 * static_cast<double>(acquisitions - handoffs) / static_cast<double>(acquisitions) : 0;

  Row row;
  row.section = "b";
  row.what = "floor: " + std::to_string(workers) + " processes hand over a blocking F_OFD_SETLKW lock (no dlock)";
  if (!lat.empty()) {
    row.p50_us = lat.p50_us();
    row.p99_us = lat.p99_us();
  }
  row.other = fmt_count(f.handoffs_per_s) + " handoffs/s; " + fmt_count(f.acquisitions_per_s) +
              " acquisitions/s; " + fmt_fixed(by_releaser, 1) + "% re-acquired by the releaser; CPU per 1,000 handoffs " +
              fmt_fixed(f.cpu_s_per_1000, 3) + " s (" + fmt_fixed(f.cpu_s_per_1000_acquisitions, 4) +
              " s per 1,000 acquisitions); overlaps " + std::to_string(r.violations.load());
  row.verdict = r.violations.load() == 0 ? Verdict::info : Verdict::fail;
  row.metrics = {{"handoffs_per_s", f.handoffs_per_s}, {"cpu_s_per_1000_handoffs", f.cpu_s_per_1000},
                 {"acquisitions_per_s", f.acquisitions_per_s},
                 {"cpu_s_per_1000_acquisitions", f.cpu_s_per_1000_acquisitions},
                 {"overlaps", static_cast<double>(r.violations.load())}};
  if (row.p50_us) row.metrics.emplace_back("p50_us", *row.p50_us);
  report.add(std::move(row));
  return f;
}

void add_handoff_floor_ratios(const HandoffFloor& floor, Report& report) {
  double rate = -1, acq_rate = -1, cpu = -1, cpu_acq = -1;
  for (const Row& row : report.rows()) {
    if (row.section != "b") continue;
    if (row.what.starts_with("handoffs per second")) {
      rate = metric(row, "handoffs_per_s");
      acq_rate = metric(row, "acquisitions_per_s");
    }
    if (row.what.starts_with("CPU per 1,000 handoffs")) {
      cpu = metric(row, "cpu_s_per_1000_handoffs");
      cpu_acq = metric(row, "cpu_s_per_1000_acquisitions");
    }
  }
  if (rate < 0 || floor.handoffs_per_s <= 0) throw std::runtime_error("no dlock hand-off figures to compare");
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  Row r;
  r.section = "b";
  r.what = "dlock hand-off versus the F_OFD_SETLKW floor";
  const double handoffs = ratio(rate, floor.handoffs_per_s);
  r.target = "handoffs/s >= 0.5 x floor";
  r.versus = fmt_fixed(handoffs, 2) + " x floor";
  r.verdict = handoffs >= 0.5 ? Verdict::pass : Verdict::miss;
  r.other = "acquisitions/s " + fmt_fixed(ratio(acq_rate, floor.acquisitions_per_s), 2) +
            " x floor's; CPU per 1,000 handoffs " + fmt_fixed(ratio(cpu, floor.cpu_s_per_1000), 2) +
            " x floor's, per 1,000 acquisitions " + fmt_fixed(ratio(cpu_acq, floor.cpu_s_per_1000_acquisitions), 2) +
            " x floor's";
  r.metrics = {{"ratio_to_floor_handoffs_per_s", handoffs},
               {"ratio_to_floor_acquisitions_per_s", ratio(acq_rate, floor.acquisitions_per_s)},
               {"ratio_to_floor_cpu_per_1000_handoffs", ratio(cpu, floor.cpu_s_per_1000)},
               {"ratio_to_floor_cpu_per_1000_acquisitions", ratio(cpu_acq, floor.cpu_s_per_1000_acquisitions)}};
  report.add(std::move(r));
}

}  // namespace dlock_bench
