// Starting the command and supervising it while the lock is held.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "signals.h"

namespace dlock::cli {

// A command started but held before its exec: its process and its process group (the pid)
// exist, so its guard can be set on them, and nothing of the command runs until
// release_command(). A held process that sees dlock gone (or the HeldCommand dropped)
// exits without running anything.
class HeldCommand {
 public:
  // Forks the held process for `argv` (argv[0] looked up in $PATH as execvp does) with
  // environment `env` ("NAME=VALUE" entries), to run with signal mask `mask`, in a process
  // group of its own. If dlock's stdin is a terminal whose foreground group is dlock's, the
  // command's group becomes the foreground one (an interactive command can still read the
  // terminal); restore_terminal() gives it back. stdin/stdout/stderr are inherited.
  // Throws Error(internal) if it cannot fork. REQUIRES: argv is not empty.
  HeldCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env, const sigset_t& mask);
  // Not released: the held process exits without running the command, and is reaped.
  ~HeldCommand();
  HeldCommand(const HeldCommand&) = delete;
  HeldCommand& operator=(const HeldCommand&) = delete;

  // The command's pid, which is its process group's id.
  pid_t pid() const { return pid_; }
  // When its process started (clock ticks after boot, /proc/PID/stat): with the pid, what
  // tells it apart from a later process of the same pid. 0 if /proc could not tell.
  std::uint64_t start_time() const { return start_; }

  // Lets the command run. Returns 0 once it runs, or -errno if it could not be executed
  // (ENOENT: not found); the process has then exited and is reaped. Call it once.
  int release();

 private:
  pid_t pid_ = -1;
  std::uint64_t start_ = 0;
  int go_ = -1;      // dlock's end: one byte lets the held process exec, end of file ends it
  int failed_ = -1;  // read end: the exec's errno, or end of file once the exec succeeded
};

// Gives the terminal's foreground back to dlock's group if spawn_command took it. Never throws.
void restore_terminal() noexcept;

// How the supervised command ended.
struct ChildExit {
  int status = 0;     // its exit status, or 128+N if signal N killed it
  bool lost = false;  // the lock was lost (or --max-hold came) while it ran: it was stopped
  bool unguarded = false;  // it was stopped because it had no guard any more (lost is set too)
};

// When and how supervise() stops the command.
struct StopPlan {
  std::chrono::milliseconds grace{0};  // between SIGTERM and SIGKILL
  // When the lock may be granted to someone else (the core's estimate, Lease::expires_at),
  // read once the lock is lost: the command must be dead `margin` before it, so the SIGKILL
  // comes at lock_end() - margin at the latest, whatever `grace` says (the kill deadline).
  std::function<std::chrono::steady_clock::time_point()> lock_end;
  std::chrono::milliseconds margin{0};
  // --max-hold: the command is stopped then (the lock still held, renewed).
  std::optional<std::chrono::steady_clock::time_point> stop_at;
  // Called once when the lock is lost (or stop_at comes), with the delay before SIGKILL.
  std::function<void(std::chrono::milliseconds kill_in)> on_lost;
  std::function<void(std::chrono::milliseconds kill_in)> on_stop;
  // Called instead of on_lost when the loss is seen only together with the command's exit.
  std::function<void()> on_lost_at_exit;
  // Told the kill deadline (lock_end() - margin) while the command runs and the lock is
  // held: whenever it changes, and well before it comes (the guard kills the command by the
  // last deadline it was told).
  std::function<void(std::chrono::steady_clock::time_point)> report_kill_deadline;
  // Called once before a stop's first signal, with when that stop must have killed the
  // command at the latest (the guard reads the tree then, and is waited for no longer than
  // that: see CommandGuard::stopping).
  std::function<void(std::chrono::steady_clock::time_point)> before_stop;
  // The guard's descriptor, watched while the command runs (CommandGuard::fd; -1: none), and
  // what is called when it is readable (CommandGuard::check): false if the command is no
  // longer guarded. The command is then stopped as on a loss, after on_unguarded.
  std::function<int()> guard_fd;
  std::function<bool()> check_guard;
  std::function<void(std::chrono::milliseconds kill_in)> on_unguarded;
};

// Blocks until child `pid` has exited, then returns how. Meanwhile forwards every signal
// read from `signals` except SIGCHLD to the child's process group (job control: the group
// only). Once `lost` becomes readable, or plan.stop_at comes, it calls plan.on_lost or
// plan.on_stop and sends the command's process tree (its group and all that descends from
// it, in groups of their own too: ProcessTree) SIGTERM, then SIGKILL if the command is still
// alive `grace` later (after a loss: by the kill deadline, plan.lock_end() - plan.margin, if
// that comes sooner); once the command itself has exited after that, whatever is left of the
// tree gets SIGKILL at once. A command found exited when `lost` is already readable or the
// kill deadline has passed counts as stopped by a loss too (plan.on_lost_at_exit; its tree
// gets SIGKILL): dlock cannot tell which came first. While the lock is held it passes the
// kill deadline to plan.report_kill_deadline, checking it at least every quarter of the time
// left (at most every 200 ms). It watches the guard (plan.guard_fd) and calls
// plan.check_guard as soon as it dies; if that says the command is unguarded, it stops it as
// on a loss (result.unguarded). Sleeps in poll(); no busy waiting. Never throws.
// `start`: the command's start time (HeldCommand::start_time()), so that it stays what is
// stopped if it leaves its group.
ChildExit supervise(pid_t pid, std::uint64_t start, SignalFd& signals, const EventFd& lost,
                    const StopPlan& plan);

// A dlock killed with SIGKILL (OOM killer, `timeout -s KILL`, a crash) cannot stop its
// command, so a guard process does: `dlock` re-executed in guard mode (run_guard), holding
// one end of a socket pair whose other end only this dlock has. When dlock dies the socket
// reaches end-of-file and the guard sends the command's process tree (as supervise() does:
// its group and all that descends from it; never the guard, dlock or dlock's group) SIGTERM,
// then SIGKILL after `grace` or at the last kill deadline it was told, whichever comes first.
// It holds copies of `lock_descriptors` (the lock service's: a file:// lock's descriptor, a
// session's connection), so a lock that ends with its holder's descriptors outlives dlock
// until the guard has seen every process of the tree gone (zombies aside). A dlock that is
// alive but stopped (SIGSTOP, a frozen cgroup, a debugger) renews nothing, so the guard is
// also told by when the command must be dead (kill_by: a margin before the lock may be
// granted to someone else): if that time comes without a later one, the guard kills the
// tree then. finish() (also the destructor)
// tells the guard the command ended normally. The guard runs in a session of its own, so a
// signal to dlock's whole process group (which timeout(1) sends) leaves it alive to do its
// job; its name (argv[0] and /proc comm) is kGuardName, so `pkill dlock` leaves it too.
class CommandGuard {
 public:
  // Starts the guard for the process group `pgid`, handing it `lock_descriptors` (those
  // below 3 are not handed over). Throws Error(internal) if it cannot.
  // `start` is the command's start time (HeldCommand::start_time()).
  CommandGuard(pid_t pgid, std::uint64_t start, std::chrono::milliseconds grace,
               const std::vector<int>& lock_descriptors);
  ~CommandGuard() { finish(); }
  CommandGuard(const CommandGuard&) = delete;
  CommandGuard& operator=(const CommandGuard&) = delete;

  // From now on the command must be dead by `deadline` (steady clock, which is the same in
  // every process of this host); time_point::max() for never. Sends it only when it
  // changed. Never throws (a guard that is gone is not told).
  void kill_by(std::chrono::steady_clock::time_point deadline) noexcept;

  // A stop of the command begins: the guard reads the tree now and every 50 ms from then on,
  // so that if dlock dies during the stop, the guard still knows what dlock's signals
  // orphaned (no longer found by parent pid). Waits up to 200 ms for the guard's first
  // reading, and never past `until` (the command's kill deadline: a guard that is stopped or
  // slow must not delay the SIGKILL); call it before the first signal. Never throws.
  void stopping(std::chrono::steady_clock::time_point until) noexcept;

  // Stops the guard without it touching the command, and reaps it: a guard held stopped
  // (SIGSTOP to its pid, a debugger) is continued, and killed if it has not ended 1 s later
  // (the command has ended: nothing is left to guard); one that cannot be reaped 1 s after
  // that (a tracer holds it) is left to init. Returns within 2 s; idempotent; never throws.
  void finish() noexcept;

  // Readable when the guard has written (a late answer to stopping()) or is gone (end of
  // file): call check() then. -1 once finished or once no guard runs.
  int fd() const noexcept { return peer_; }

  // Reads what made fd() readable. A guard killed by a signal (`kill -9 GUARD`) is reaped
  // and replaced at once by a new one on the same tree, told the last kill deadline and a
  // stop under way, and dlock says so on stderr: without it, a dlock killed later would leave
  // the command running with nothing to stop it. Returns false if the command is no longer
  // guarded: the guard ended by itself (it does so only once it has stopped the command, or
  // on an error) or no new one could be started (said on stderr). True otherwise, also when
  // the guard is still there. Never throws.
  bool check() noexcept;

 private:
  // Starts a guard process on the tree (pgid_, start_) with the descriptors of descriptors_
  // still open; sets guard_ and peer_. Throws Error(internal) if it cannot.
  void spawn();

  pid_t pgid_;
  std::uint64_t start_;
  std::chrono::milliseconds grace_;
  std::vector<int> descriptors_;
  std::chrono::steady_clock::time_point told_ = std::chrono::steady_clock::time_point::max();
  bool stopping_ = false;  // stopping() was called: a new guard follows the tree too
  int peer_ = -1;          // dlock's end of the socket pair
  pid_t guard_ = -1;
};

// The guard's own main: argv after "lock-guard __guard" is PGID START GRACE_MS [FD...], the FDs
// being the lock descriptors it keeps; stdin is its end of the socket pair.
// Returns the process's exit status.
int run_guard(int argc, const char* const* argv);

// The hidden first argument that makes `dlock` run_guard().
inline constexpr const char* kGuardCommand = "__guard";
// The guard's argv[0] and process name: without "dlock" in it, so that `pkill dlock`,
// `pkill -f dlock` and `killall dlock`, which kill dlock, leave the guard that must then stop
// CMD.
inline constexpr const char* kGuardName = "lock-guard";

}  // namespace dlock::cli
