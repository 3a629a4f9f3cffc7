#include "child.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include "dlock/error.h"
#include "exit_codes.h"
#include "process_tree.h"

namespace dlock::cli {
namespace {

// How often a stop in progress looks for new processes in the command's tree.
constexpr std::chrono::milliseconds kRescan{50};

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitInternal;
}

bool g_took_terminal = false;  // spawn_command made the command's group the foreground one

// Runs `f` with SIGTTOU blocked: a process outside the foreground group may then change it.
template <class F>
void without_sigttou(F f) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
  f();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

HeldCommand::HeldCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const sigset_t& mask) {
  // Everything the child needs is made before fork(): dlock has threads, so the child may only
  // make async-signal-safe calls (execvpe searches $PATH on its own stack).
  std::vector<char*> args = c_strings(argv);
  std::vector<char*> envp = c_strings(env);
  int go[2], failed[2];
  // A socket pair for `go`: send(MSG_NOSIGNAL) to a held process that was killed fails with
  // EPIPE instead of killing dlock with SIGPIPE.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
    throw Error(ErrorCode::internal, std::string("cannot start the command: socketpair: ") + std::strerror(errno));
  }
  if (::pipe2(failed, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(go[0]);
    ::close(go[1]);
    throw Error(ErrorCode::internal, std::string("cannot start the command: pipe: ") + std::strerror(e));
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(go[1]);
    ::close(failed[0]);
    ::setpgid(0, 0);  // a group of its own, led by the command
    char byte = 0;
    ssize_t n;
    while ((n = ::read(go[0], &byte, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1) ::_exit(kExitInternal);  // dlock is gone or gave up: run nothing
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    ::execvpe(args[0], args.data(), envp.data());
    const int e = errno;
    (void)!::write(failed[1], &e, sizeof e);
    ::_exit(e == ENOENT ? kExitNotFound : kExitCannotRun);
  }
  const int fork_error = errno;
  ::close(go[0]);
  ::close(failed[1]);
  if (pid < 0) {
    ::close(go[1]);
    ::close(failed[0]);
    throw Error(ErrorCode::internal, std::string("cannot start the command: fork: ") + std::strerror(fork_error));
  }
  pid_ = pid;
  if (const std::optional<ProcessStat> stat = read_process(pid)) start_ = stat->start;
  go_ = go[1];
  failed_ = failed[0];
  ::setpgid(pid, pid);  // also here: the group exists once the constructor returns
  // Without this an interactive command, now in a background group, would be stopped by
  // SIGTTIN on its first read from the terminal.
  if (::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) {
    without_sigttou([&] { g_took_terminal = ::tcsetpgrp(STDIN_FILENO, pid) == 0; });
  }
}

HeldCommand::~HeldCommand() {
  if (go_ < 0) return;
  ::close(go_);  // end of file: the held process exits
  ::close(failed_);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

int HeldCommand::release() {
  const char go = 1;
  ::send(go_, &go, 1, MSG_NOSIGNAL);  // if it fails, the process is gone: its exit tells how
  ::close(go_);
  go_ = -1;
  int error = 0;
  ssize_t n;
  while ((n = ::read(failed_, &error, sizeof error)) < 0 && errno == EINTR) {
  }
  ::close(failed_);
  failed_ = -1;
  if (n != static_cast<ssize_t>(sizeof error)) return 0;  // end of file: the exec closed it
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  return -error;
}

void restore_terminal() noexcept {
  if (!g_took_terminal) return;
  without_sigttou([] { ::tcsetpgrp(STDIN_FILENO, ::getpgrp()); });
  g_took_terminal = false;
}

ChildExit supervise(pid_t pid, std::uint64_t start, SignalFd& signals, const EventFd& lost,
                    const StopPlan& plan) {
  using Clock = std::chrono::steady_clock;
  ChildExit result;
  // What is stopped: CMD's group and all that descends from it (never dlock, nor its group).
  ProcessTree tree(pid, start, {::getpid()}, {::getpgrp()});
  std::optional<Clock::time_point> kill_at;  // set once SIGTERM was sent to stop it
  bool killed = false;
  bool lost_handled = false;
  bool terminating = false;  // SIGINT, SIGTERM or SIGQUIT was forwarded: CMD is ending
  bool guard_readable = false;  // handled once CMD is known to run on (a guard that ends
                                // after stopping CMD is no news then)
  // By when the command must be dead: a margin before the lock may be someone else's.
  auto kill_deadline = [&plan] {
    const Clock::time_point end = plan.lock_end ? plan.lock_end() : Clock::time_point::max();
    return end == Clock::time_point::max() ? end : end - plan.margin;
  };
  // Sends SIGTERM now and plans the SIGKILL for `grace` later, or `latest` if sooner. A
  // `latest` already come (a lease's end, which the lost signal announces a margin early)
  // gets both at once, without waiting for the guard to read the tree: told the same
  // deadline, it is killing the tree itself and answers only once done (dlock waited up to
  // 200 ms for that, and CMD ran on past the lease's end).
  auto stop = [&](Clock::time_point latest, const std::function<void(std::chrono::milliseconds)>& tell) {
    result.lost = true;
    const auto now = Clock::now();
    kill_at = std::min(now + plan.grace, std::max(latest, now));
    if (tell) tell(std::chrono::ceil<std::chrono::milliseconds>(*kill_at - now));
    if (latest <= now) {
      // CMD's group is frozen before the reading of /proc: CMD, dlock's child not reaped
      // yet, keeps its pid, so nobody else's group can have that id.
      ::kill(-pid, SIGSTOP);
      tree.terminate_and_kill();
      killed = true;
      return;
    }
    if (plan.before_stop) plan.before_stop(*kill_at);
    tree.terminate();  // SIGCONT too: a stopped command (Ctrl-Z) handles SIGTERM once continued
  };
  for (;;) {
    // WNOWAIT: the exited command stays a zombie, so its pid (the group's id) cannot be
    // reused while the rest of its group is signalled below.
    siginfo_t info{};
    int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid) {
      // A loss that came with the exit (the same wake-up, or a dlock stopped meanwhile
      // whose guard killed the command at the kill deadline) is still a loss: which of the
      // two came first cannot be told, and the lock may have been someone else's meanwhile.
      if (!result.lost &&
          (wait_readable({lost.fd()}, std::chrono::milliseconds{0}) == 0 || kill_deadline() <= Clock::now())) {
        result.lost = true;
        if (plan.on_lost_at_exit) plan.on_lost_at_exit();
      }
      if (result.lost) {
        tree.kill();  // what it started must not run on unprotected
      } else if (terminating) {
        // A terminating signal was forwarded to CMD's group only (job control): what CMD
        // left in groups of its own never got it, and must not outlive the lock.
        const Clock::time_point until = std::min(Clock::now() + plan.grace, kill_deadline());
        if (plan.before_stop) plan.before_stop(until);
        tree.terminate();
        while (tree.refresh().runs && Clock::now() < until) std::this_thread::sleep_for(kRescan);
        tree.kill();
      }
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      result.status = shell_status(status);
      return result;
    }
    if (r < 0 && errno != EINTR) {  // ECHILD: cannot happen with SIGCHLD at SIG_DFL
      result.status = kExitInternal;
      return result;
    }
    if (guard_readable) {
      guard_readable = false;
      if (plan.check_guard && !plan.check_guard() && !kill_at) {
        // Nothing would stop CMD if dlock died now: stop it while dlock still can.
        result.unguarded = true;
        stop(kill_deadline(), plan.on_unguarded);
        continue;
      }
    }

    std::optional<std::chrono::milliseconds> timeout;
    const auto now = Clock::now();
    if (kill_at && !killed) {
      if (now >= *kill_at) {
        tree.kill();
        killed = true;
      } else {
        // What the tree starts meanwhile is found while its parent lives, then killed too.
        tree.refresh();
        timeout = std::min(std::chrono::ceil<std::chrono::milliseconds>(*kill_at - now), kRescan);
      }
    } else if (!kill_at && plan.stop_at) {
      if (now >= *plan.stop_at) {
        // The lock stays held meanwhile, up to its kill deadline.
        stop(kill_deadline(), plan.on_stop);
        continue;
      }
      timeout = std::chrono::ceil<std::chrono::milliseconds>(*plan.stop_at - now);
    }

    if (terminating && !kill_at) {
      tree.refresh();  // what CMD's end will leave behind, found while its parents live
      timeout = timeout ? std::min(*timeout, kRescan) : kRescan;
    }

    if (!lost_handled && plan.report_kill_deadline) {
      const Clock::time_point deadline = kill_deadline();
      plan.report_kill_deadline(deadline);
      if (deadline != Clock::time_point::max()) {
        const auto check = std::clamp(std::chrono::ceil<std::chrono::milliseconds>((deadline - now) / 4),
                                      std::chrono::milliseconds{1}, std::chrono::milliseconds{200});
        timeout = timeout ? std::min(*timeout, check) : check;
      }
    }

    // Once the loss is handled, stop watching the (still readable) eventfd.
    const int guard = plan.guard_fd ? plan.guard_fd() : -1;
    int which = wait_readable({signals.fd(), lost_handled ? -1 : lost.fd(), guard}, timeout);
    if (which == 0) {
      while (std::optional<int> sig = signals.read()) {
        if (*sig == SIGCHLD) continue;
        if (*sig == SIGINT || *sig == SIGTERM || *sig == SIGQUIT) {
          // Read the tree before the signal orphans anything (and have the guard read it).
          // Not SIGHUP: many a daemon reloads on it and runs on, and the tree would then be
          // read every 50 ms for as long.
          if (!terminating && plan.before_stop) plan.before_stop(kill_deadline());
          terminating = true;
          tree.refresh();
        }
        ::kill(-pid, *sig);
      }
    } else if (which == 2) {
      guard_readable = true;
    } else if (which == 1) {
      lost_handled = true;
      const Clock::time_point deadline = kill_deadline();
      if (!kill_at) {
        stop(deadline, plan.on_lost);
      } else if (!killed && deadline < *kill_at) {
        kill_at = std::max(deadline, Clock::now());  // lost while already stopping (--max-hold)
      }
    }
  }
}

CommandGuard::CommandGuard(pid_t pgid, std::uint64_t start, std::chrono::milliseconds grace,
                           const std::vector<int>& lock_descriptors)
    : pgid_(pgid), start_(start), grace_(grace), descriptors_(lock_descriptors) {
  spawn();
}

void CommandGuard::spawn() {
  // A socket pair rather than a pipe: send(MSG_NOSIGNAL) to a guard that is already gone
  // fails with EPIPE instead of killing dlock with SIGPIPE.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw Error(ErrorCode::internal, std::string("cannot start the command's guard: socketpair: ") +
                                         std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);  // dup2 drops O_CLOEXEC
  ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  // stderr stays dlock's: the guard says there what it cannot stop (wait_tree_gone).
  std::vector<std::string> argv = {kGuardName, kGuardCommand, std::to_string(pgid_),
                                   std::to_string(start_), std::to_string(grace_.count())};
  for (int fd : descriptors_) {
    if (fd <= STDERR_FILENO) continue;  // taken by the guard's own stdio
    // For a new guard (check()): one closed since is left out, and dlock's end of the socket
    // pair never goes (the guard would then never see dlock's death), whatever its number.
    if (fd == fds[0] || fd == fds[1] || ::fcntl(fd, F_GETFD) < 0) continue;
    // dup2 onto itself clears close-on-exec (POSIX, glibc >= 2.29): kept across the exec.
    ::posix_spawn_file_actions_adddup2(&actions, fd, fd);
    argv.push_back(std::to_string(fd));
  }
  std::vector<char*> args = c_strings(argv);
  char* no_env[] = {nullptr};  // nothing of dlock's environment (DLOCK_URI) goes further
  // In a session of its own: whatever signals dlock's process group or job (timeout(1) at
  // expiry, `kill -9 -PGID`, a shell's job control, a Ctrl-C or hang-up at the terminal)
  // does not reach the guard, which is what must outlive dlock to stop CMD. It has no
  // controlling terminal either. It still ends with CMD or dlock (run_guard).
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  int e = ::posix_spawn(&guard_, "/proc/self/exe", &actions, &attr, args.data(), no_env);
  ::posix_spawnattr_destroy(&attr);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(fds[0]);
  if (e != 0) {
    ::close(fds[1]);
    throw Error(ErrorCode::internal, std::string("cannot start the command's guard: ") + std::strerror(e));
  }
  peer_ = fds[1];
}

namespace {
// dlock -> guard: 'd' (the command ended: do nothing), 'u' and the kill deadline as 8 bytes
// (steady-clock nanoseconds since its epoch, host byte order), or 's' (a stop begins: follow
// the tree), which the guard answers with 't' once it has read the tree.
constexpr char kDone = 'd';
constexpr char kValidUntil = 'u';
constexpr std::size_t kValidUntilSize = 1 + sizeof(std::int64_t);
constexpr char kStopping = 's';
constexpr char kTracking = 't';
// How long dlock waits for the guard's 't' before it signals anyway (a guard that is stopped
// or gone must not hold the stop up).
constexpr std::chrono::milliseconds kTrackingWait{200};
// How often a guard that follows a stop reads the tree again (supervise's kRescan).
constexpr std::chrono::milliseconds kGuardRescan{50};
// How long finish() waits for a guard to end before it kills it (one that runs ends in ms),
// and then to reap it before leaving it to init.
constexpr std::chrono::milliseconds kFinishWait{1000};

// Reaps child `pid` if it ends within `limit`; true if it did (or is no child to reap).
bool reaped_within(pid_t pid, std::chrono::milliseconds limit) noexcept {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r != 0 && !(r < 0 && errno == EINTR)) return true;
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool send_all(int fd, const char* data, std::size_t size) noexcept {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes; false at end of file or on an error.
bool read_all(int fd, char* data, std::size_t size) noexcept {
  while (size > 0) {
    ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}
}  // namespace

void CommandGuard::kill_by(std::chrono::steady_clock::time_point end) noexcept {
  if (peer_ < 0 || end == told_) return;
  char message[kValidUntilSize];
  message[0] = kValidUntil;
  const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch()).count();
  std::memcpy(message + 1, &ns, sizeof ns);
  if (send_all(peer_, message, sizeof message)) told_ = end;
}

void CommandGuard::stopping(std::chrono::steady_clock::time_point until) noexcept {
  stopping_ = true;
  if (peer_ < 0 || !send_all(peer_, &kStopping, 1)) return;
  // (A deadline already past makes a negative wait, which wait_readable takes as none.)
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  if (wait_readable({peer_}, std::min(kTrackingWait, left)) != 0) return;
  char answer = 0;
  while (::recv(peer_, &answer, 1, 0) < 0 && errno == EINTR) {
  }
}

bool CommandGuard::check() noexcept {
  if (peer_ < 0) return false;
  char buf[16];
  ssize_t n;
  // A late answer to stopping() is read and dropped; end of file (or a reset) is the guard gone.
  while ((n = ::recv(peer_, buf, sizeof buf, MSG_DONTWAIT)) > 0 || (n < 0 && errno == EINTR)) {
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
  ::close(peer_);
  peer_ = -1;
  int status = 0;
  while (::waitpid(guard_, &status, 0) < 0 && errno == EINTR) {
  }
  const pid_t old = guard_;
  if (!WIFSIGNALED(status)) {
    // It ended by itself, which it does only once it has stopped the command (the kill
    // deadline came while dlock was stopped) or on an error: not something to start again.
    std::cerr << "dlock: the command's guard (pid " << old << ") ended with status "
              << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << "\n";
    return false;
  }
  try {
    spawn();
  } catch (const Error& e) {
    std::cerr << "dlock: the command's guard (pid " << old << ") was killed by signal "
              << WTERMSIG(status) << " and no new one could be started: " << e.what() << "\n";
    return false;
  }
  std::cerr << "dlock: the command's guard (pid " << old << ") was killed by signal "
            << WTERMSIG(status) << "; a new one (pid " << guard_ << ") guards the command now\n";
  // The new guard knows what the old one was told: the kill deadline, and a stop under way.
  const auto deadline = told_;
  told_ = std::chrono::steady_clock::time_point::max();
  if (deadline != told_) kill_by(deadline);
  if (stopping_) stopping(told_);
  return true;
}

void CommandGuard::finish() noexcept {
  if (peer_ < 0) return;
  send_all(peer_, &kDone, 1);
  ::close(peer_);
  peer_ = -1;
  // Waiting for a guard that never reads its 'd' kept dlock, and the lock, for ever.
  ::kill(guard_, SIGCONT);
  if (reaped_within(guard_, kFinishWait)) return;
  ::kill(guard_, SIGKILL);
  // A traced guard's death is told to its tracer first: if it is not reaped soon, dlock, which
  // exits next, leaves that to init.
  reaped_within(guard_, kFinishWait);
}

namespace {

// How long the guard waits between two readings of a tree it has SIGKILLed: 2 ms at first
// (a killed process is gone within a few), doubling up to about a second. A member it may not
// signal (another user's: a setuid program) never goes away: a reading every 2 ms for as long
// cost 0.75 s of CPU in 3 s (review F5), now a reading a second.
constexpr std::chrono::milliseconds kGoneCheckFirst{2};
constexpr std::chrono::milliseconds kGoneCheckMax{1024};
// A member still running once the wait between readings has grown to this (a quarter second after
// the SIGKILL) is one the guard cannot stop: it says so, once.
constexpr std::chrono::milliseconds kGoneCheckTell{256};

// Says on stderr (dlock's) which members of `tree` run on after a SIGKILL, and why if it can.
void tell_unstoppable(const ProcessTree& tree, bool holds_descriptors) {
  std::string line = "dlock: lock-guard " + std::to_string(::getpid()) + ": cannot stop";
  constexpr std::size_t kShown = 5;
  const std::vector<pid_t>& running = tree.running();
  for (std::size_t i = 0; i < running.size() && i < kShown; ++i) {
    const bool permitted = ::kill(running[i], 0) == 0 || errno != EPERM;
    line += (i == 0 ? " pid " : ", ") + std::to_string(running[i]) +
            (permitted ? " (still running after SIGKILL)" : " (not permitted: another user's)");
  }
  if (running.size() > kShown) line += " and " + std::to_string(running.size() - kShown) + " more";
  line += " of the command's tree";
  if (holds_descriptors) {
    line += "; the lock's descriptors stay open here until it ends (a file:// or SQL session "
            "lock stays held)";
  }
  line += "; looking again every second\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

// Waits for all of `tree`, SIGKILLed, to be gone (zombies aside): until then the lock
// descriptors this guard holds keep a lock that ends with them held. A member found new is
// SIGKILLed at once; the readings back off from 2 ms to about a second.
void wait_tree_gone(ProcessTree& tree, bool holds_descriptors) {
  std::chrono::milliseconds pause = kGoneCheckFirst;
  for (ProcessTree::Scan scan = tree.refresh(); scan.runs; scan = tree.refresh()) {
    if (scan.grew) tree.kill();
    if (pause == kGoneCheckTell) tell_unstoppable(tree, holds_descriptors);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kGoneCheckMax);
  }
}

// Closes every descriptor from 3 on but those in `keep` (sorted).
void close_all_but(const std::vector<int>& keep) {
  unsigned next = 3;
  for (int fd : keep) {
    if (static_cast<unsigned>(fd) > next) ::close_range(next, static_cast<unsigned>(fd) - 1, 0);
    next = std::max(next, static_cast<unsigned>(fd) + 1);
  }
  ::close_range(next, ~0U, 0);
}

bool parse_number(const char* text, long& out) {
  const char* end = text + std::strlen(text);
  return std::from_chars(text, end, out).ptr == end && end != text;
}

}  // namespace

int run_guard(int argc, const char* const* argv) {
  if (argc < 5) return kExitUsage;
  long pgid_number = 0, grace_ms = 0;
  unsigned long long start = 0;
  const char* start_text = argv[3];
  if (!parse_number(argv[2], pgid_number) || !parse_number(argv[4], grace_ms) ||
      std::from_chars(start_text, start_text + std::strlen(start_text), start).ptr !=
          start_text + std::strlen(start_text)) {
    return kExitUsage;
  }
  const pid_t pgid = static_cast<pid_t>(pgid_number);
  if (pgid <= 1 || grace_ms < 0) return kExitUsage;
  std::vector<int> keep;
  for (int i = 5; i < argc; ++i) {
    long fd = 0;
    if (!parse_number(argv[i], fd) || fd <= STDERR_FILENO || fd > 1 << 30) return kExitUsage;
    keep.push_back(static_cast<int>(fd));
  }
  std::sort(keep.begin(), keep.end());
  // The command's tree, never this guard nor dlock (the parent, while it lives) nor their
  // groups: a nested dlock's guard is in an outer one's tree, never in its own.
  const pid_t dlock = ::getppid();
  ProcessTree tree(pgid, start, {::getpid(), dlock}, {::getpgrp(), ::getpgid(dlock)});
  // /proc/self/exe makes the process name "exe" whatever argv[0] says.
  ::prctl(PR_SET_NAME, kGuardName, 0, 0, 0);
  for (int s : kForwardedSignals) ::signal(s, SIG_IGN);
  // Nothing inherited by mistake (a pipe someone waits to see closed) may outlive dlock in
  // here: only the lock descriptors dlock handed over.
  close_all_but(keep);
  using Clock = std::chrono::steady_clock;
  Clock::time_point kill_by = Clock::time_point::max();  // until dlock says otherwise
  // dlock is stopping the tree: what its signals orphan is no longer found by parent pid, so
  // the guard reads the tree along with dlock, in case dlock dies before the end.
  bool tracking = false;
  for (;;) {
    std::optional<std::chrono::milliseconds> timeout;
    if (kill_by != Clock::time_point::max()) {
      timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(kill_by - Clock::now()),
                         std::chrono::milliseconds{0});
    }
    if (tracking) timeout = timeout ? std::min(*timeout, kGuardRescan) : kGuardRescan;
    if (wait_readable({STDIN_FILENO}, timeout) != 0) {
      if (Clock::now() < kill_by) {  // a rescan, or EINTR
        if (tracking) tree.refresh();
        continue;
      }
      // dlock is alive but told nothing newer (stopped, frozen, or killing the tree too):
      // the lock may be someone else's a margin from now. SIGTERM for form, SIGKILL at once.
      tree.terminate_and_kill();
      wait_tree_gone(tree, !keep.empty());
      return 0;
    }
    char kind = 0;
    if (!read_all(STDIN_FILENO, &kind, 1)) break;  // end of file: dlock died
    if (kind == kDone) return 0;                     // dlock saw the command end
    if (kind == kStopping) {
      tree.refresh();  // before dlock's first signal: it waits for the answer
      tracking = true;
      send_all(STDIN_FILENO, &kTracking, 1);
      continue;
    }
    std::int64_t ns = 0;
    if (kind != kValidUntil || !read_all(STDIN_FILENO, reinterpret_cast<char*>(&ns), sizeof ns)) break;
    kill_by = Clock::time_point(std::chrono::nanoseconds(ns));
  }
  // End of file: dlock died without a word. Its lock ends with it, or with its lease (by
  // kill_by, it said), or is kept by the descriptors held here until the group is gone.
  tree.terminate();
  const auto kill_at = std::min(Clock::now() + std::chrono::milliseconds(grace_ms), kill_by);
  for (auto now = Clock::now(); now < kill_at; now = Clock::now()) {
    if (!tree.refresh().runs) return 0;  // also finds what the tree starts meanwhile
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(20), kill_at - now));
  }
  tree.kill();
  wait_tree_gone(tree, !keep.empty());
  return 0;
}

}  // namespace dlock::cli
