#include "run_command.h"

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "child.h"
#include "default_uri.h"
#include "dlock/dlock.h"
#include "dlock/support/close_on_exec.h"
#include "exit_codes.h"
#include "signals.h"

extern char** environ;

namespace dlock::cli {
namespace {

// While alive, a forwarded signal cancels `cancel` (a user's Ctrl-C ends the wait for the
// lock). finish() stops the watcher and tells which signal, if any, cancelled.
class CancelOnSignal {
 public:
  CancelOnSignal(SignalFd& signals, std::stop_source cancel)
      : thread_([this, &signals, cancel]() mutable { watch(signals, cancel); }) {}
  ~CancelOnSignal() { finish(); }
  CancelOnSignal(const CancelOnSignal&) = delete;
  CancelOnSignal& operator=(const CancelOnSignal&) = delete;

  int finish() {
    if (thread_.joinable()) {
      stop_.notify();
      thread_.join();
    }
    return signal_.load();
  }

 private:
  void watch(SignalFd& signals, std::stop_source& cancel) {
    for (;;) {
      int which = wait_readable({signals.fd(), stop_.fd()}, std::nullopt);
      if (which == 1) return;
      if (which != 0) continue;  // EINTR
      while (std::optional<int> sig = signals.read()) {
        if (*sig == SIGCHLD || is_job_control(*sig) || signal_.load() != 0) continue;  // no command yet
        signal_.store(*sig);
        cancel.request_stop();
      }
    }
  }

  EventFd stop_;
  std::atomic<int> signal_{0};
  std::thread thread_;  // last: starts once the members above exist
};

// The name as it can be printed safely: non-printable bytes as \xNN.
std::string printable(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

// This process's environment with DLOCK_NAME, DLOCK_FENCING_TOKEN and DLOCK_URI set to ours;
// DLOCK_URI is the provider's redacted URI, never one with the password.
std::vector<std::string> child_environment(const Lease& lease, const std::string& redacted_uri) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.starts_with("DLOCK_NAME=") || entry.starts_with("DLOCK_FENCING_TOKEN=") ||
        entry.starts_with("DLOCK_URI=")) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back("DLOCK_NAME=" + lease.name());
  env.push_back("DLOCK_FENCING_TOKEN=" + std::to_string(lease.fencing_token()));
  env.push_back("DLOCK_URI=" + redacted_uri);
  return env;
}

// Releases; true if a held lock was released. A failure is a warning, not an exit status:
// the command's status matters more, and the lock ends by itself.
bool release_quietly(Lease& lease, const std::string& shown) {
  try {
    return lease.release();
  } catch (const Error& e) {
    std::cerr << "dlock: warning: could not release lock '" << shown << "' (" << e.what()
              << "); it ends by itself when its lease or session does\n";
    return false;
  }
}

// How long the guard lets CMD handle SIGTERM after dlock died: only as long as the lock
// surely outlives dlock. A session backend may free it with dlock's process (file://, SQL
// sessions; the guard's copies of the lock descriptors keep some of them, not all): no grace
// then. A lease ends by itself: the guard kills by the last kill deadline dlock told it; before
// the first one, a renewed lease was last renewed at most a third of it ago, so half of it is
// left at least, and an explicit --lease may be about to run out (no grace).
std::chrono::milliseconds guard_grace(const RunArgs& args, const Capabilities& caps) {
  if (caps.liveness == Liveness::session || args.lease) return std::chrono::milliseconds{0};
  return std::min(args.grace, caps.default_lease / 2);
}

// How long before the lock may be granted to someone else CMD must be dead: the core's loss
// margin for the lease whose end that is (the lost signal fires that early). On a session
// backend with --lease, either the client's lease or the session's bound may end it first:
// the smaller margin of the two.
std::chrono::milliseconds kill_margin(const RunArgs& args, const Capabilities& caps) {
  if (caps.liveness == Liveness::session && args.lease) return loss_margin(std::min(*args.lease, caps.default_lease));
  return loss_margin(args.lease.value_or(caps.default_lease));
}

// The descriptors dlock opened (`inherited`: those it was started with), the lock service's
// among them: the guard keeps copies of them.
std::vector<int> own_descriptors(const std::vector<int>& inherited) {
  std::vector<int> own;
  for (int fd : support::open_descriptors()) {
    if (!std::binary_search(inherited.begin(), inherited.end(), fd)) own.push_back(fd);
  }
  return own;
}

// `inherited`: the descriptors dlock was started with (support::inheritable_descriptors()).
int run_with_signals(const RunArgs& args, SignalFd& signals, const std::vector<int>& inherited) {
  const std::string shown = printable(args.name);
  EventFd lost;  // outlives the lease, whose on_lost callback raises it
  std::shared_ptr<ILockProvider> provider = dlock::open(resolve_uri(args.uri));

  AcquireOptions options;
  options.lease = args.lease;
  // --max-hold is not the core's max_hold (which gives the lock up at once): dlock stops CMD
  // then and keeps the lock until CMD is gone, so nobody runs the job alongside it.
  std::stop_source cancel;
  options.cancel = cancel.get_token();
  const Wait wait = args.wait ? Wait::for_duration(*args.wait) : Wait::forever();
  const LockMode mode = args.shared ? LockMode::shared : LockMode::exclusive;

  std::optional<Lease> lease;
  int cancelled_by = 0;
  {
    CancelOnSignal watcher(signals, cancel);
    lease = provider->try_acquire(args.name, mode, wait, options);
    cancelled_by = watcher.finish();
  }
  if (cancelled_by != 0) {
    if (lease) release_quietly(*lease, shown);
    return 128 + cancelled_by;
  }
  const auto granted = std::chrono::steady_clock::now();
  if (!lease) {
    if (args.wait && args.wait->count() <= 0) {
      std::cerr << "dlock: lock '" << shown << "' is held by someone else (not acquired; --wait 0 tries once)\n";
    } else {
      std::cerr << "dlock: lock '" << shown << "' not acquired within "
                << (args.wait ? format_duration(*args.wait) : "the wait") << "\n";
    }
    return kExitNotAcquired;
  }
  if (args.verbose) {
    std::cerr << "dlock: acquired '" << shown << "' token " << lease->fencing_token() << " on "
              << provider->uri() << "\n";
  }
  lease->on_lost([&lost] { lost.notify(); });

  support::close_new_descriptors_on_exec(inherited);  // CMD and its guard get none of the lock service's
  const std::vector<int> lock_descriptors = own_descriptors(inherited);
  // CMD is held before its exec until its guard is up: a dlock killed in between leaves
  // nothing of CMD running unguarded.
  std::optional<HeldCommand> held;
  std::optional<CommandGuard> guard;
  try {
    held.emplace(args.command, child_environment(*lease, provider->uri()), signals.original_mask());
    guard.emplace(held->pid(), held->start_time(), guard_grace(args, provider->capabilities()),
                  lock_descriptors);
  } catch (const Error&) {
    held.reset();  // it runs nothing
    restore_terminal();
    release_quietly(*lease, shown);
    throw;
  }
  // The guard knows by when CMD must be dead before CMD runs: a dlock stopped from CMD's first
  // instant (SIGSTOP, a frozen cgroup) reports nothing more.
  const std::chrono::milliseconds margin = kill_margin(args, provider->capabilities());
  if (const auto end = lease->expires_at(); end != std::chrono::steady_clock::time_point::max()) {
    guard->kill_by(end - margin);
  }
  const pid_t pid = held->pid();
  if (const int failed = held->release(); failed != 0) {
    guard->finish();
    restore_terminal();
    release_quietly(*lease, shown);
    std::cerr << "dlock: cannot run " << args.command[0] << ": " << std::strerror(-failed) << "\n";
    return failed == -ENOENT ? kExitNotFound : kExitCannotRun;
  }

  StopPlan plan;
  plan.grace = args.grace;
  plan.lock_end = [&lease] { return lease->expires_at(); };
  plan.margin = margin;
  if (args.max_hold) plan.stop_at = granted + *args.max_hold;
  plan.report_kill_deadline = [&guard](std::chrono::steady_clock::time_point at) { guard->kill_by(at); };
  plan.before_stop = [&guard](std::chrono::steady_clock::time_point until) { guard->stopping(until); };
  plan.guard_fd = [&guard] { return guard->fd(); };
  plan.check_guard = [&guard] { return guard->check(); };
  plan.on_unguarded = [&](std::chrono::milliseconds kill_in) {
    std::cerr << "dlock: the command has no guard any more to stop it should dlock die; stopping "
              << "it (SIGTERM, SIGKILL after " << format_duration(kill_in)
              << "), then releasing lock '" << shown << "'\n";
  };
  plan.on_lost = [&](std::chrono::milliseconds kill_in) {
    std::cerr << "dlock: lock '" << shown << "' lost; stopping the command (SIGTERM, SIGKILL after "
              << format_duration(kill_in) << ")\n";
  };
  plan.on_lost_at_exit = [&] {
    std::cerr << "dlock: lock '" << shown << "' lost by the time the command ended\n";
  };
  plan.on_stop = [&](std::chrono::milliseconds kill_in) {
    std::cerr << "dlock: lock '" << shown << "' held for --max-hold " << format_duration(*args.max_hold)
              << "; stopping the command (SIGTERM, SIGKILL after " << format_duration(kill_in)
              << "), then releasing the lock\n";
  };
  ChildExit exit = supervise(pid, held->start_time(), signals, lost, plan);
  guard->finish();
  restore_terminal();
  if (release_quietly(*lease, shown) && args.verbose) std::cerr << "dlock: released '" << shown << "'\n";
  if (exit.unguarded) return kExitInternal;
  return exit.lost ? kExitLockLost : exit.status;
}

}  // namespace

int run_locked(const RunArgs& args) {
  try {
    // Listed before dlock opens any descriptor of its own.
    const std::vector<int> inherited = support::inheritable_descriptors();
    SignalFd signals;  // first thread-wise: every thread dlock starts inherits the blocked mask
    return run_with_signals(args, signals, inherited);
  } catch (const Error& e) {
    std::cerr << "dlock: " << e.what() << "\n";
    return exit_code_for(e.code());
  } catch (const std::exception& e) {
    std::cerr << "dlock: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace dlock::cli
