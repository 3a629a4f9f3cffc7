// dlock_conformance_taker: a child process that takes locks on command, so the suite can test
// exclusion between processes and what happens when a holder crashes.
//
// Usage: dlock_conformance_taker <uri>
// One command per line on stdin, one reply line on stdout (times are steady_clock ns, which
// is CLOCK_MONOTONIC and comparable with the parent's):
//   acquire <hexname> <ex|sh> <wait_ms|forever> <lease_ms|0> [fair]
//        -> acquired <token> <start_ns> | busy | error <code> <message>
//   release      -> released <0|1> <end_ns>     (the most recent hold)
//   lost         -> lost <0|1>                   (has the most recent hold's lost signal fired?)
//   incr <hexname> <counter-file> <n>
//        -> n times: lock, read the number in the file, write it + 1, unlock; replies one
//           "hold <token> <start_ns> <end_ns>" line per hold, then "incremented"
//   abandon      -> "abandoned", then exits at once without releasing anything
//   spawn        -> starts `sleep 600` the way a service starts a helper (fork + exec, no
//                   descriptor closed; stdio on /dev/null) and replies "spawned <pid> <fds>":
//                   the descriptors the helper inherited that this process did not inherit
//                   itself ("fd=target,...", or "-")
//   exit         -> releases everything, replies "bye", exits 0
// EOF on stdin behaves as exit. A process that is never sent anything holds until killed.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "framework/hex.h"
#include "framework/safety_checker.h"

namespace {

using dlock::conformance::from_hex;
using dlock::conformance::now_ns;

void reply(const std::string& line) {
  std::cout << line << '\n' << std::flush;
}

std::string one_line(std::string text) {
  for (auto& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

dlock::Wait parse_wait(const std::string& text) {
  if (text == "forever") return dlock::Wait::forever();
  return dlock::Wait::for_duration(std::chrono::milliseconds(std::stoll(text)));
}

long read_counter(const std::string& path) {
  std::ifstream in(path);
  long value = 0;
  in >> value;
  return value;
}

void write_counter(const std::string& path, long value) {
  std::ofstream out(path, std::ios::trunc);
  out << value << '\n';
}

// This process's descriptors above stdio that an exec would keep (no FD_CLOEXEC), as
// "fd=target,fd=target" ("-" when none), leaving out those in `known` (the same form).
std::string inheritable_descriptors(const std::string& known = "") {
  std::string out;
  DIR* dir = ::opendir("/proc/self/fd");  // its own descriptor is close-on-exec
  if (dir == nullptr) return "(/proc/self/fd unreadable)";
  while (const dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (fd <= 2 || fd == ::dirfd(dir)) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || (flags & FD_CLOEXEC) != 0) continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    const std::string item =
        std::to_string(fd) + '=' + (n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "?");
    if (("," + known + ",").find("," + item + ",") != std::string::npos) continue;
    if (!out.empty()) out += ',';
    out += item;
  }
  ::closedir(dir);
  return out.empty() ? "-" : out;
}

// fork + exec of `sleep 600`, as system() or posix_spawn would start it. Returns its pid.
pid_t spawn_sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int run(dlock::ILockProvider& provider, const std::string& inherited_at_start) {
  std::vector<dlock::Lease> leases;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "acquire") {
        std::string hex, mode, wait;
        long long lease_ms = 0;
        std::string flag;
        in >> hex >> mode >> wait >> lease_ms >> flag;
        const auto name = from_hex(hex);
        if (!name) {
          reply("error invalid_argument bad hex name");
          continue;
        }
        dlock::AcquireOptions options;
        if (lease_ms > 0) options.lease = std::chrono::milliseconds(lease_ms);
        options.fair = flag == "fair";
        auto lease = provider.try_acquire(
            *name, mode == "sh" ? dlock::LockMode::shared : dlock::LockMode::exclusive,
            parse_wait(wait), options);
        if (!lease) {
          reply("busy");
          continue;
        }
        const auto start = now_ns();
        reply("acquired " + std::to_string(lease->fencing_token()) + " " + std::to_string(start));
        leases.push_back(std::move(*lease));
      } else if (cmd == "release") {
        if (leases.empty()) {
          reply("error not_held nothing to release");
          continue;
        }
        const auto end = now_ns();
        const bool released = leases.back().release();
        leases.pop_back();
        reply(std::string("released ") + (released ? "1 " : "0 ") + std::to_string(end));
      } else if (cmd == "lost") {
        const bool lost = !leases.empty() && leases.back().lost_token().stop_requested();
        reply(std::string("lost ") + (lost ? "1" : "0"));
      } else if (cmd == "incr") {
        std::string hex, file;
        int n = 0;
        in >> hex >> file >> n;
        const auto name = from_hex(hex).value_or("");
        for (int i = 0; i < n; ++i) {
          auto lease = provider.acquire(name, dlock::LockMode::exclusive,
                                        dlock::Wait::for_duration(std::chrono::seconds(30)));
          const auto start = now_ns();
          const long value = read_counter(file);
          std::this_thread::yield();
          write_counter(file, value + 1);
          const auto end = now_ns();
          const auto token = lease.fencing_token();
          lease.release();
          reply("hold " + std::to_string(token) + " " + std::to_string(start) + " " +
                std::to_string(end));
        }
        reply("incremented");
      } else if (cmd == "abandon") {
        reply("abandoned");
        std::_Exit(0);  // no destructors: nothing is released
      } else if (cmd == "spawn") {
        const std::string inherited = inheritable_descriptors(inherited_at_start);
        const pid_t pid = spawn_sleeper();
        if (pid < 0) {
          reply("error internal fork failed");
          continue;
        }
        reply("spawned " + std::to_string(pid) + " " + inherited);
      } else if (cmd == "exit") {
        leases.clear();
        reply("bye");
        return 0;
      } else {
        reply("error invalid_argument unknown command " + cmd);
      }
    } catch (const dlock::Error& e) {
      reply("error " + std::string(dlock::to_string(e.code())) + " " + one_line(e.message()));
    } catch (const std::exception& e) {
      reply("error internal " + one_line(e.what()));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: dlock_conformance_taker <uri>\n";
    return 2;
  }
  try {
    const std::string inherited_at_start = inheritable_descriptors();
    auto provider = dlock::open(argv[1]);
    reply("ready");
    return run(*provider, inherited_at_start);
  } catch (const dlock::Error& e) {
    reply("error " + std::string(dlock::to_string(e.code())) + " " + one_line(e.message()));
    return 1;
  }
}
