#include "stopped_server.h"

#include <dirent.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace dlock::mysql::test {

std::string servers_script() {
  const char* s = std::getenv("DLOCK_SERVERS_SCRIPT");
  return s == nullptr ? "" : s;
}

pid_t mariadbd_pid() {
  const std::string cmd = "'" + servers_script() + "' status mariadb 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return 0;
  char line[512] = {};
  std::string out;
  while (std::fgets(line, sizeof line, f) != nullptr) out += line;
  ::pclose(f);
  const auto at = out.find("(pid ");
  return at == std::string::npos ? 0 : static_cast<pid_t>(std::atol(out.c_str() + at + 5));
}

bool all_threads_stopped(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  do {
    bool all = true;
    int seen = 0;
    if (DIR* dir = ::opendir(tasks.c_str())) {
      while (dirent* e = ::readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream stat(tasks + "/" + e->d_name + "/stat");
        std::string line;
        std::getline(stat, line);
        const auto paren = line.rfind(')');
        if (paren == std::string::npos || paren + 2 >= line.size()) continue;  // thread gone
        ++seen;
        if (line[paren + 2] != 'T' && line[paren + 2] != 't') all = false;
      }
      ::closedir(dir);
    }
    if (all && seen > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

StoppedServer::StoppedServer(pid_t pid) : pid_(pid) {
  if (pid_ <= 0 || ::kill(pid_, SIGSTOP) != 0) return;
  ok_ = all_threads_stopped(pid_, std::chrono::seconds(2));
}

void StoppedServer::resume() noexcept {
  if (resumed_ || pid_ <= 0) return;
  resumed_ = true;
  ::kill(pid_, SIGCONT);
}

}  // namespace dlock::mysql::test
