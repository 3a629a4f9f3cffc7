#include "contender.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <thread>

#include "clock.h"
#include "dlock/error.h"
#include "dlock/open.h"

namespace dlock_bench {

namespace {

void fail(WorkerSlot& slot, const char* message) noexcept {
  std::strncpy(slot.error, message, sizeof slot.error - 1);
  slot.error[sizeof slot.error - 1] = '\0';
  slot.state.store(static_cast<std::uint32_t>(WorkerState::failed));
}

// A release answered Error(unavailable) keeps the hold and may be sent again (lease.h): a
// loaded server that answers one release late (a ZooKeeper ensemble past command_timeout)
// costs the run that wait, counted in the slot, not the whole measurement. A release that
// gets no answer for this long fails the worker, within the run's finish grace.
constexpr std::chrono::seconds kReleaseRetryFor{5};
constexpr std::chrono::milliseconds kReleaseRetryPause{10};

bool release_retrying(dlock::Lease& lease, WorkerSlot& slot, const std::stop_token& cancel) {
  const auto give_up = std::chrono::steady_clock::now() + kReleaseRetryFor;
  for (;;) {
    try {
      return lease.release();
    } catch (const dlock::Error& e) {
      if (e.code() != dlock::ErrorCode::unavailable) throw;
      slot.release_retries.fetch_add(1, std::memory_order_relaxed);
      if (cancel.stop_requested() || std::chrono::steady_clock::now() >= give_up) throw;
    }
    std::this_thread::sleep_for(kReleaseRetryPause);
  }
}

void acquire_loop(dlock::ILockProvider& provider, const SharedRegion& region, int index, const std::string& name,
                  const std::stop_token& cancel) {
  SharedHeader& h = region.header();
  WorkerSlot& slot = h.slots[index];
  std::uint32_t* samples = region.samples(index);
  dlock::AcquireOptions options;
  options.cancel = cancel;
  for (;;) {
    std::optional<dlock::Lease> lease =
        provider.try_acquire(name, dlock::LockMode::exclusive, dlock::Wait::forever(), options);
    if (!lease) return;  // cancelled
    const std::uint64_t acquired = mono_ns();
    if (h.holding.fetch_add(1) != 0) h.violations.fetch_add(1);
    const bool stopping = h.stop.load() != 0;
    const std::int32_t last = h.last_holder.load();
    const std::uint64_t released = h.release_ns.load();
    if (!stopping) {
      slot.acquisitions.fetch_add(1, std::memory_order_relaxed);
      if (last >= 0 && last != index) {
        slot.handoffs_in.fetch_add(1, std::memory_order_relaxed);
        std::uint64_t n = slot.samples.load(std::memory_order_relaxed);
        if (n < h.sample_capacity) {
          std::uint64_t ns = acquired - released;
          samples[n] = ns > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(ns);
          slot.samples.store(n + 1, std::memory_order_relaxed);
        }
      } else if (last == index) {
        slot.self_reacquires.fetch_add(1, std::memory_order_relaxed);
      }
    }
    h.last_holder.store(index);
    h.holding.fetch_sub(1);
    // Stamped while still holding, so the next holder reads this release's time.
    h.release_ns.store(mono_ns());
    if (!release_retrying(*lease, slot, cancel)) throw std::runtime_error("release reported the lock not held");
    if (stopping) return;
  }
}

}  // namespace

void contend(dlock::ILockProvider& provider, const SharedRegion& region, int index, const std::string& name,
             std::stop_token cancel, bool own_cpu) noexcept {
  SharedHeader& h = region.header();
  WorkerSlot& slot = h.slots[index];
  try {
    slot.state.store(static_cast<std::uint32_t>(WorkerState::ready));
    while (h.go.load() == 0) {
      if (h.stop.load() != 0 || cancel.stop_requested()) {
        slot.state.store(static_cast<std::uint32_t>(WorkerState::done));
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const double cpu0 = own_cpu ? process_cpu_seconds() : 0;
    acquire_loop(provider, region, index, name, cancel);
    if (own_cpu) slot.window_cpu_ns.store(static_cast<std::uint64_t>((process_cpu_seconds() - cpu0) * 1e9));
    slot.state.store(static_cast<std::uint32_t>(WorkerState::done));
  } catch (const std::exception& e) {
    fail(slot, e.what());
  } catch (...) {
    fail(slot, "unknown exception");
  }
}

int worker_main(const WorkerArgs& args) {
  // A worker never outlives the run that started it (Ctrl-C, crash): it would contend forever.
  const pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent || parent == 1) return 1;
  const char* uri = std::getenv(kWorkerUriEnv);
  try {
    SharedRegion region = SharedRegion::open(args.shm_path);
    if (args.index >= static_cast<int>(region.header().workers)) {
      std::cerr << "dlock-bench worker: index out of range\n";
      return 2;
    }
    WorkerSlot& slot = region.header().slots[args.index];
    if (uri == nullptr) {
      fail(slot, "no URI in the environment");
      return 1;
    }
    std::shared_ptr<dlock::ILockProvider> provider;
    try {
      provider = dlock::open(uri);
    } catch (const std::exception& e) {
      fail(slot, e.what());
      return 1;
    }
    contend(*provider, region, args.index, args.name, std::stop_token{}, true);
    return slot.state.load() == static_cast<std::uint32_t>(WorkerState::done) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "dlock-bench worker: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace dlock_bench
