#include "child.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <optional>

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

}  // namespace

pid_t spawn_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const sigset_t& mask) {
  posix_spawnattr_t attr;
  if (int e = ::posix_spawnattr_init(&attr); e != 0) return -e;
  ::posix_spawnattr_setsigmask(&attr, &mask);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args = c_strings(argv);
  std::vector<char*> envp = c_strings(env);
  pid_t pid = -1;
  int e = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), envp.data());
  ::posix_spawnattr_destroy(&attr);
  return e == 0 ? pid : -e;
}

ChildExit supervise(pid_t pid, SignalFd& signals, const EventFd& lost, std::chrono::milliseconds grace,
                    const std::function<void()>& on_lost) {
  using Clock = std::chrono::steady_clock;
  ChildExit result;
  std::optional<Clock::time_point> kill_at;  // set once SIGTERM was sent for a lost lock
  bool killed = false;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      result.status = shell_status(status);
      return result;
    }
    if (r < 0 && errno != EINTR) {  // ECHILD: cannot happen with SIGCHLD at SIG_DFL
      result.status = kExitInternal;
      return result;
    }

    std::optional<std::chrono::milliseconds> timeout;
    if (kill_at && !killed) {
      auto now = Clock::now();
      if (now >= *kill_at) {
        ::kill(pid, SIGKILL);
        killed = true;
      } else {
        timeout = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - now);
      }
    }

    // Once the loss is handled, stop watching the (still readable) eventfd.
    int which = wait_readable({signals.fd(), result.lost ? -1 : lost.fd()}, timeout);
    if (which == 0) {
      while (std::optional<int> sig = signals.read()) {
        if (*sig != SIGCHLD) ::kill(pid, *sig);
      }
    } else if (which == 1) {
      result.lost = true;
      if (on_lost) on_lost();
      ::kill(pid, SIGTERM);
      kill_at = Clock::now() + grace;
    }
  }
}

}  // namespace dlock::cli
