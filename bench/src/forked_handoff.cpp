#include "forked_handoff.h"

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
#include <thread>
#include <vector>

#include "clock.h"
#include "shared_region.h"

namespace dlock_bench {

namespace {
constexpr std::uint64_t kSamples = 1u << 20;  // per worker; later hand-offs are counted only
}  // namespace

struct alignas(64) ForkedSlot {
  std::atomic<std::uint32_t> ready;
  std::atomic<std::uint32_t> failed;  // a code for describe_failure, 0 while fine
  std::atomic<std::uint64_t> acquisitions;
  std::atomic<std::uint64_t> handoffs;
  std::atomic<std::uint64_t> samples;
};

struct ForkedRegion {
  alignas(64) std::atomic<std::uint64_t> release_ns;
  std::atomic<std::int32_t> last_holder;
  alignas(64) std::atomic<std::uint32_t> holding;
  std::atomic<std::uint64_t> violations;
  alignas(64) std::atomic<std::uint32_t> go;
  std::atomic<std::uint32_t> stop;
  ForkedSlot slots[kMaxWorkers];

  std::uint32_t* samples(int index) {
    auto* first = reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(this) + sizeof(ForkedRegion));
    return first + static_cast<std::size_t>(index) * kSamples;
  }
};

void HandoffWorker::ready_and_wait_for_start() {
  region_.slots[index_].ready.store(1);
  while (region_.go.load() == 0 && region_.stop.load() == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

bool HandoffWorker::acquired() {
  const std::uint64_t now = mono_ns();
  ForkedRegion& r = region_;
  if (r.holding.fetch_add(1) != 0) r.violations.fetch_add(1);
  stopping_ = r.stop.load() != 0;
  if (stopping_) return true;
  ForkedSlot& slot = r.slots[index_];
  const std::int32_t last = r.last_holder.load();
  const std::uint64_t released = r.release_ns.load();
  slot.acquisitions.fetch_add(1, std::memory_order_relaxed);
  if (last >= 0 && last != index_) {
    slot.handoffs.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t n = slot.samples.load(std::memory_order_relaxed);
    if (n < kSamples) {
      const std::uint64_t ns = now - released;
      r.samples(index_)[n] = ns > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(ns);
      slot.samples.store(n + 1, std::memory_order_relaxed);
    }
  }
  return false;
}

void HandoffWorker::releasing() {
  region_.last_holder.store(index_);
  region_.holding.fetch_sub(1);
  region_.release_ns.store(mono_ns());
}

bool HandoffWorker::stopped() const { return region_.stop.load() != 0; }

void HandoffWorker::fail(std::uint32_t code) {
  region_.slots[index_].failed.store(code == 0 ? 1 : code);
  ::_exit(1);
}

namespace {

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

std::string failure_of(const ForkedHandoffRun& run, std::uint32_t code) {
  return "hand-off floor worker: " + (run.describe_failure ? run.describe_failure(code) : std::to_string(code));
}

}  // namespace

ForkedHandoffResult run_forked_handoff(const ForkedHandoffRun& run) {
  const int workers = run.workers;
  if (workers < 2 || workers > kMaxWorkers) throw std::runtime_error("hand-off floor: bad worker count");
  const std::size_t size = sizeof(ForkedRegion) + static_cast<std::size_t>(workers) * kSamples * sizeof(std::uint32_t);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::runtime_error(std::string("hand-off floor: mmap: ") + std::strerror(errno));
  Mapping mapping{base, size};
  auto& r = *new (base) ForkedRegion{};
  r.last_holder.store(-1);

  Children children;
  for (int i = 0; i < workers; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("hand-off floor: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      HandoffWorker worker(r, i);
      int code = 1;
      try {
        code = run.body(worker, i);
      } catch (...) {
        worker.fail(1);
      }
      ::_exit(code);
    }
    children.pids.push_back(pid);
  }
  const std::uint64_t start_deadline = mono_ns() + 15'000'000'000ull;
  for (;;) {
    int ready = 0;
    for (int i = 0; i < workers; ++i) {
      if (const std::uint32_t code = r.slots[i].failed.load(); code != 0) throw std::runtime_error(failure_of(run, code));
      ready += r.slots[i].ready.load() != 0 ? 1 : 0;
    }
    if (ready == workers) break;
    if (mono_ns() > start_deadline) throw std::runtime_error("hand-off floor: workers not ready within 15 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (run.on_start) run.on_start();
  const std::uint64_t t_go = mono_ns();
  r.go.store(1);
  std::this_thread::sleep_for(run.duration);
  r.stop.store(1);
  const std::uint64_t t_stop = mono_ns();

  ForkedHandoffResult result;
  bool all_ok = true;
  for (pid_t pid : children.pids) {
    int status = 0;
    rusage ru{};
    if (::wait4(pid, &status, 0, &ru) == pid) result.cpu_s += cpu_seconds(ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) all_ok = false;
  }
  children.pids.clear();
  for (int i = 0; i < workers; ++i) {
    if (const std::uint32_t code = r.slots[i].failed.load(); code != 0) throw std::runtime_error(failure_of(run, code));
  }
  if (!all_ok) throw std::runtime_error("hand-off floor: a worker process failed");

  result.seconds = static_cast<double>(t_stop - t_go) / 1e9;
  result.overlaps = r.violations.load();
  for (int i = 0; i < workers; ++i) {
    result.handoffs += r.slots[i].handoffs.load();
    result.acquisitions += r.slots[i].acquisitions.load();
    const std::uint32_t* smp = r.samples(i);
    for (std::uint64_t k = 0, n = r.slots[i].samples.load(); k < n; ++k) result.latency.add(smp[k]);
  }
  return result;
}

}  // namespace dlock_bench
