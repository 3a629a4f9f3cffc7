// (b) for file://: the kernel's own hand-off floor, and dlock's hand-off against it.
//
// settings.workers processes (forked, no dlock in them) each open the same file and loop
// F_OFD_SETLKW (blocking, exclusive) -> stamp -> unlock on it for settings.contended: the
// kernel queues the waiters and wakes them at each unlock, with nothing in user space. The
// kernel does not hand the lock to a woken waiter: the waiter retries when it is scheduled,
// and a releaser that comes straight back usually takes the lock first (on 2 busy cores,
// ~99% of acquisitions are by the releaser), so hand-offs happen at preemptions. dlock's
// file:// waiters block the same way, so both show that behaviour. Counted by the shared
// harness (forked_handoff.h), exactly as the dlock contenders count.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "floor_file_handoff.h"
#include "forked_handoff.h"

namespace dlock_bench {
namespace {

// The worker's whole life: only system calls and atomics (the parent has threads: no
// allocation, no locks after fork).
int file_worker(HandoffWorker& w, const char* path) {
  int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) w.fail(static_cast<std::uint32_t>(errno));
  w.ready_and_wait_for_start();
  struct flock lock {};
  lock.l_whence = SEEK_SET;
  for (;;) {
    lock.l_type = F_WRLCK;
    while (::fcntl(fd, F_OFD_SETLKW, &lock) != 0) {
      if (errno != EINTR) w.fail(static_cast<std::uint32_t>(errno));
    }
    const bool over = w.acquired();
    w.releasing();
    lock.l_type = F_UNLCK;
    ::fcntl(fd, F_OFD_SETLK, &lock);
    if (over) return 0;
  }
}

}  // namespace

HandoffFloor run_file_handoff_floor(const dlock::Uri& uri, const Settings& settings, Report& report) {
  const std::string path =
      (uri.path.empty() ? std::string(".") : uri.path) + "/dlock-bench-handoff." + std::to_string(::getpid());
  struct Unlink {
    const std::string& p;
    ~Unlink() { ::unlink(p.c_str()); }
  } unlink_guard{path};

  ForkedHandoffRun run;
  run.workers = settings.workers;
  run.duration = std::chrono::duration_cast<std::chrono::milliseconds>(settings.contended);
  run.body = [&path](HandoffWorker& w, int) { return file_worker(w, path.c_str()); };
  run.describe_failure = [](std::uint32_t code) { return std::string(std::strerror(static_cast<int>(code))); };
  ForkedHandoffResult res = run_forked_handoff(run);

  HandoffFloor f;
  f.handoffs_per_s = res.handoffs_per_s();
  f.cpu_s_per_1000 = res.cpu_s_per_1000_handoffs();
  f.acquisitions_per_s = res.acquisitions_per_s();
  f.cpu_s_per_1000_acquisitions = res.cpu_s_per_1000_acquisitions();

  Row row;
  row.section = "b";
  row.what = "floor: " + std::to_string(run.workers) + " processes hand over a blocking F_OFD_SETLKW lock (no dlock)";
  if (!res.latency.empty()) {
    row.p50_us = res.latency.p50_us();
    row.p99_us = res.latency.p99_us();
  }
  row.other = fmt_count(f.handoffs_per_s) + " handoffs/s; " + fmt_count(f.acquisitions_per_s) +
              " acquisitions/s; " + fmt_fixed(res.reacquired_by_releaser_percent(), 1) +
              "% re-acquired by the releaser; CPU per 1,000 handoffs " + fmt_fixed(f.cpu_s_per_1000, 3) + " s (" +
              fmt_fixed(f.cpu_s_per_1000_acquisitions, 4) + " s per 1,000 acquisitions); overlaps " +
              std::to_string(res.overlaps);
  row.verdict = res.overlaps == 0 ? Verdict::info : Verdict::fail;
  row.metrics = {{"handoffs_per_s", f.handoffs_per_s}, {"cpu_s_per_1000_handoffs", f.cpu_s_per_1000},
                 {"acquisitions_per_s", f.acquisitions_per_s},
                 {"cpu_s_per_1000_acquisitions", f.cpu_s_per_1000_acquisitions},
                 {"overlaps", static_cast<double>(res.overlaps)}};
  if (row.p50_us) row.metrics.emplace_back("p50_us", *row.p50_us);
  report.add(std::move(row));
  return f;
}

void add_handoff_floor_ratios(const HandoffFloor& floor, Report& report) {
  double rate = -1, acq_rate = -1, cpu = -1, cpu_acq = -1;
  for (const Row& row : report.rows()) {
    if (row.section != "b") continue;
    if (row.what.starts_with("handoffs per second")) {
      rate = row.metric("handoffs_per_s");
      acq_rate = row.metric("acquisitions_per_s");
    }
    if (row.what.starts_with("CPU per 1,000 handoffs")) {
      cpu = row.metric("cpu_s_per_1000_handoffs");
      cpu_acq = row.metric("cpu_s_per_1000_acquisitions");
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
