#include "framework/taker_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "framework/hex.h"

extern char** environ;

namespace dlock::conformance {

std::string taker_path() { return DLOCK_TAKER_PATH; }

Taker::Taker(const std::string& uri, std::chrono::milliseconds ready_timeout) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("taker: pipe failed");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw std::runtime_error("taker: pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  const std::string path = taker_path();
  std::vector<char*> argv{const_cast<char*>(path.c_str()), const_cast<char*>(uri.c_str()), nullptr};
  const int rc = posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("taker: cannot start " + path + ": " + std::strerror(rc));
  }
  const auto first = read_line(ready_timeout);
  if (first != "ready") throw std::runtime_error("taker did not start: " + first);
}

Taker::~Taker() {
  if (pid_ > 0) kill9();
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
}

std::string Taker::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
      auto line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("taker: no reply within timeout");
    pollfd p{from_child_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    const auto n = ::read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("taker exited unexpectedly");
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

void Taker::send(const std::string& line) {
  const std::string data = line + "\n";
  if (::write(to_child_, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    throw std::runtime_error("taker: cannot write command");
  }
}

std::string Taker::command(const std::string& line, std::chrono::milliseconds timeout) {
  send(line);
  return read_line(timeout);
}

std::optional<Taker::Acquired> Taker::acquire(std::string_view name, std::chrono::milliseconds wait,
                                              std::chrono::milliseconds lease, bool shared) {
  std::ostringstream cmd;
  cmd << "acquire " << to_hex(name) << (shared ? " sh " : " ex ")
      << (wait.count() < 0 ? std::string("forever") : std::to_string(wait.count())) << ' '
      << lease.count();
  const auto timeout = wait.count() < 0 ? std::chrono::milliseconds(60000) : wait + std::chrono::seconds(10);
  const auto answer = command(cmd.str(), timeout);
  if (answer == "busy") return std::nullopt;
  std::istringstream in(answer);
  std::string word;
  Acquired a;
  if (in >> word && word == "acquired" && in >> a.token >> a.start_ns) return a;
  throw std::runtime_error("taker: " + answer);
}

bool Taker::release(std::int64_t* end_ns) {
  const auto answer = command("release", std::chrono::seconds(10));
  std::istringstream in(answer);
  std::string word;
  int released = 0;
  std::int64_t end = 0;
  if (!(in >> word >> released >> end) || word != "released") {
    throw std::runtime_error("taker: " + answer);
  }
  if (end_ns) *end_ns = end;
  return released == 1;
}

bool Taker::lost() {
  const auto answer = command("lost", std::chrono::seconds(5));
  if (answer == "lost 1") return true;
  if (answer == "lost 0") return false;
  throw std::runtime_error("taker: " + answer);
}

void Taker::increment(std::string_view name, const std::string& counter_file, int n,
                      SafetyChecker& checker, const std::string& label,
                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  auto line = command("incr " + to_hex(name) + " " + counter_file + " " + std::to_string(n), left());
  while (line != "incremented") {
    std::istringstream in(line);
    std::string word;
    HoldRecord h;
    if (!(in >> word >> h.token >> h.start_ns >> h.end_ns) || word != "hold") {
      throw std::runtime_error("taker: " + line);
    }
    h.name = std::string(name);
    h.owner = label;
    checker.record(std::move(h));
    line = read_line(left());
  }
}

void Taker::abandon() {
  const auto answer = command("abandon", std::chrono::seconds(5));
  if (answer != "abandoned") throw std::runtime_error("taker: " + answer);
  reap();
}

Taker::Spawned Taker::spawn() {
  const auto answer = command("spawn", std::chrono::seconds(10));
  std::istringstream in(answer);
  std::string word;
  Spawned s;
  in >> word >> s.pid >> s.inherited;
  if (word != "spawned" || s.pid <= 0) throw std::runtime_error("taker: " + answer);
  return s;
}

std::int64_t Taker::kill9() {
  const auto at = now_ns();
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    reap();
  }
  return at;
}

void Taker::reap() {
  if (pid_ <= 0) return;
  // Bounded: a child that ignores everything gets SIGKILL after 5 s.
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace dlock::conformance
