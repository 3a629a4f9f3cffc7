// Signals as file descriptors, so one poll() loop can wait for the child, the lost-lock
// event and the user's signals without busy polling or async-signal-safety puzzles.
#pragma once

#include <signal.h>

#include <chrono>
#include <initializer_list>
#include <optional>

namespace dlock::cli {

// The signals `dlock run` forwards to its command: the ones that end it (received while
// waiting for the lock, they cancel the wait) and the job-control ones. dlock itself never
// stops: a stopped dlock would stop renewing while its command ran on, so Ctrl-Z or
// `kill -TSTP` stops the command's group instead, with the lock still held and renewed.
inline constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};

// SIGTSTP, SIGTTIN, SIGTTOU or SIGCONT.
inline constexpr bool is_job_control(int sig) noexcept {
  return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU || sig == SIGCONT;
}

// Blocks the forwarded signals and SIGCHLD and reads them from a signalfd.
// REQUIRES: constructed in the main thread before any other thread starts, so every thread
// inherits the blocked mask and the signals reach only the signalfd.
// Throws Error(internal) if the signalfd cannot be created. Not copyable. The destructor
// closes the fd but leaves the signals blocked (the process is about to exit).
class SignalFd {
 public:
  SignalFd();
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const noexcept { return fd_; }
  // The signal mask in force before construction: the mask a child should get back.
  const sigset_t& original_mask() const noexcept { return original_; }
  // Reads one pending signal without blocking; nullopt when none is pending.
  std::optional<int> read() noexcept;

 private:
  int fd_ = -1;
  sigset_t original_{};
};

// An eventfd that another thread (or a dlock callback) can raise; readable once raised.
// Not copyable; notify() is async-signal-safe and thread-safe.
class EventFd {
 public:
  EventFd();  // throws Error(internal)
  ~EventFd();
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  int fd() const noexcept { return fd_; }
  void notify() const noexcept;

 private:
  int fd_ = -1;
};

// Waits until one of `fds` is readable or `timeout` passes (nullopt: no timeout).
// Returns the index of a readable fd, or -1 on timeout or EINTR (recheck your deadline).
int wait_readable(std::initializer_list<int> fds, std::optional<std::chrono::milliseconds> timeout);

}  // namespace dlock::cli
