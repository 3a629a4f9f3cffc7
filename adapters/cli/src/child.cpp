#include "child.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>

#include "dlock/error.h"
#include "exit_codes.h"

namespace dlock::cli {
namespace {

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

pid_t spawn_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const sigset_t& mask) {
  posix_spawnattr_t attr;
  if (int e = ::posix_spawnattr_init(&attr); e != 0) return -e;
  ::posix_spawnattr_setsigmask(&attr, &mask);
  ::posix_spawnattr_setpgroup(&attr, 0);  // a group of its own, led by the command
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args = c_strings(argv);
  std::vector<char*> envp = c_strings(env);
  pid_t pid = -1;
  int e = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), envp.data());
  ::posix_spawnattr_destroy(&attr);
  if (e != 0) return -e;
  // Without this an interactive command, now in a background group, would be stopped by
  // SIGTTIN on its first read from the terminal.
  if (::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) {
    without_sigttou([&] { g_took_terminal = ::tcsetpgrp(STDIN_FILENO, pid) == 0; });
    ::kill(-pid, SIGCONT);  // in case it read the terminal before the hand-over
  }
  return pid;
}

void restore_terminal() noexcept {
  if (!g_took_terminal) return;
  without_sigttou([] { ::tcsetpgrp(STDIN_FILENO, ::getpgrp()); });
  g_took_terminal = false;
}

ChildExit supervise(pid_t pid, SignalFd& signals, const EventFd& lost, const StopPlan& plan) {
  using Clock = std::chrono::steady_clock;
  ChildExit result;
  std::optional<Clock::time_point> kill_at;  // set once SIGTERM was sent to stop it
  bool killed = false;
  bool lost_handled = false;
  // Sends SIGTERM now and plans the SIGKILL for `grace` later, or `latest` if sooner.
  auto stop = [&](Clock::time_point latest, const std::function<void(std::chrono::milliseconds)>& tell) {
    result.lost = true;
    const auto now = Clock::now();
    kill_at = std::min(now + plan.grace, std::max(latest, now));
    if (tell) tell(std::chrono::ceil<std::chrono::milliseconds>(*kill_at - now));
    ::kill(-pid, SIGTERM);
    ::kill(-pid, SIGCONT);  // a stopped command (Ctrl-Z) handles SIGTERM once continued
  };
  for (;;) {
    // WNOWAIT: the exited command stays a zombie, so its pid (the group's id) cannot be
    // reused while the rest of its group is signalled below.
    siginfo_t info{};
    int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid) {
      // A loss that came with the exit (the same wake-up, or a dlock stopped meanwhile
      // whose guard killed the command at the lock's end) is still a loss: which of the two
      // came first cannot be told, and the lock may have been someone else's meanwhile.
      if (!result.lost &&
          (wait_readable({lost.fd()}, std::chrono::milliseconds{0}) == 0 ||
           (plan.lock_end && plan.lock_end() <= Clock::now()))) {
        result.lost = true;
        if (plan.on_lost_at_exit) plan.on_lost_at_exit();
      }
      if (result.lost) ::kill(-pid, SIGKILL);  // what it started must not run on unprotected
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

    std::optional<std::chrono::milliseconds> timeout;
    const auto now = Clock::now();
    if (kill_at && !killed) {
      if (now >= *kill_at) {
        ::kill(-pid, SIGKILL);
        killed = true;
      } else {
        timeout = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - now);
      }
    } else if (!kill_at && plan.stop_at) {
      if (now >= *plan.stop_at) {
        stop(Clock::time_point::max(), plan.on_stop);  // the lock stays held meanwhile
        continue;
      }
      timeout = std::chrono::ceil<std::chrono::milliseconds>(*plan.stop_at - now);
    }

    if (!lost_handled && plan.lock_end && plan.report_lock_end) {
      const Clock::time_point end = plan.lock_end();
      plan.report_lock_end(end);
      if (end != Clock::time_point::max()) {
        const auto check = std::clamp(std::chrono::ceil<std::chrono::milliseconds>((end - now) / 4),
                                      std::chrono::milliseconds{1}, std::chrono::milliseconds{200});
        timeout = timeout ? std::min(*timeout, check) : check;
      }
    }

    // Once the loss is handled, stop watching the (still readable) eventfd.
    int which = wait_readable({signals.fd(), lost_handled ? -1 : lost.fd()}, timeout);
    if (which == 0) {
      while (std::optional<int> sig = signals.read()) {
        if (*sig != SIGCHLD) ::kill(-pid, *sig);
      }
    } else if (which == 1) {
      lost_handled = true;
      const Clock::time_point end = plan.lock_end ? plan.lock_end() : Clock::time_point::max();
      if (!kill_at) {
        stop(end, plan.on_lost);
      } else if (!killed && end < *kill_at) {
        kill_at = std::max(end, Clock::now());  // lost while already stopping (--max-hold)
      }
    }
  }
}

CommandGuard::CommandGuard(pid_t pgid, std::chrono::milliseconds grace) {
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
  ::posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const std::vector<std::string> argv = {"dlock", kGuardCommand, std::to_string(pgid),
                                         std::to_string(grace.count())};
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
// dlock -> guard: 'd' (the command ended: do nothing), or 'u' and the lock's end as 8 bytes
// (steady-clock nanoseconds since its epoch, host byte order).
constexpr char kDone = 'd';
constexpr char kValidUntil = 'u';
constexpr std::size_t kValidUntilSize = 1 + sizeof(std::int64_t);

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

void CommandGuard::lock_valid_until(std::chrono::steady_clock::time_point end) noexcept {
  if (peer_ < 0 || end == told_) return;
  char message[kValidUntilSize];
  message[0] = kValidUntil;
  const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch()).count();
  std::memcpy(message + 1, &ns, sizeof ns);
  if (send_all(peer_, message, sizeof message)) told_ = end;
}

void CommandGuard::finish() noexcept {
  if (peer_ < 0) return;
  send_all(peer_, &kDone, 1);
  ::close(peer_);
  peer_ = -1;
  while (::waitpid(guard_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

int run_guard(int argc, const char* const* argv) {
  if (argc != 4) return kExitUsage;
  const pid_t pgid = static_cast<pid_t>(std::atol(argv[2]));
  const long grace_ms = std::atol(argv[3]);
  if (pgid <= 1 || grace_ms < 0) return kExitUsage;
  for (int s : kForwardedSignals) ::signal(s, SIG_IGN);
  // Nothing inherited by mistake (a lock file's descriptor) may outlive dlock in here.
  ::close_range(3, ~0U, 0);
  using Clock = std::chrono::steady_clock;
  Clock::time_point lock_end = Clock::time_point::max();  // until dlock says otherwise
  for (;;) {
    std::optional<std::chrono::milliseconds> timeout;
    if (lock_end != Clock::time_point::max()) {
      timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(lock_end - Clock::now()),
                         std::chrono::milliseconds{0});
    }
    if (wait_readable({STDIN_FILENO}, timeout) != 0) {
      if (Clock::now() < lock_end) continue;  // EINTR
      // dlock is alive but told nothing newer (stopped, frozen): the lock may be someone
      // else's from now on. SIGTERM for form, SIGKILL at once.
      ::kill(-pgid, SIGTERM);
      ::kill(-pgid, SIGKILL);
      return 0;
    }
    char kind = 0;
    if (!read_all(STDIN_FILENO, &kind, 1)) break;  // end of file: dlock died
    if (kind == kDone) return 0;                     // dlock saw the command end
    std::int64_t ns = 0;
    if (kind != kValidUntil || !read_all(STDIN_FILENO, reinterpret_cast<char*>(&ns), sizeof ns)) break;
    lock_end = Clock::time_point(std::chrono::nanoseconds(ns));
  }
  // End of file: dlock died without a word, and its lock with it (or soon).
  if (::kill(-pgid, SIGTERM) != 0) return 0;
  const auto kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < kill_at) {
    if (::kill(-pgid, 0) != 0) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pgid, SIGKILL);
  return 0;
}

}  // namespace dlock::cli
