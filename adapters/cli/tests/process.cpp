#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlock::cli::testing {

Sandbox::Sandbox() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "dlock-cli-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  std::filesystem::create_directory(dir_ / "locks");
}

Sandbox::~Sandbox() {
  for (auto& [pid, info] : started_) {  // never leave a process behind a failed test
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string Sandbox::file_uri() const { return "file://" + (dir_ / "locks").string(); }

pid_t Sandbox::start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv{DLOCK_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return start_program(argv, env);
}

std::filesystem::path Sandbox::stderr_path(pid_t pid) const {
  return dir_ / ("err-" + std::to_string(started_.at(pid).second));
}

pid_t Sandbox::start_program(const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  vars.erase("DLOCK_URI");
  vars["XDG_RUNTIME_DIR"] = dir_.string();
  for (const auto& [k, v] : env) {
    if (v.empty()) {
      vars.erase(k);
    } else {
      vars[k] = v;
    }
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv_strings = args;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int index = next_++;
  std::string out = (dir_ / ("out-" + std::to_string(index))).string();
  std::string err = (dir_ / ("err-" + std::to_string(index))).string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv_strings[0]);
  started_[pid] = {std::chrono::steady_clock::now(), index};
  return pid;
}

Finished Sandbox::wait(pid_t pid, std::chrono::milliseconds limit) {
  auto [start, index] = started_.at(pid);
  Finished f;
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      f.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  started_.erase(pid);
  f.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  f.exited = !f.timed_out && WIFEXITED(status);
  f.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  f.out = read_file(dir_ / ("out-" + std::to_string(index)));
  f.err = read_file(dir_ / ("err-" + std::to_string(index)));
  return f;
}

Finished Sandbox::run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                      std::chrono::milliseconds limit) {
  return wait(start(args, env), limit);
}

bool Sandbox::wait_ready(pid_t pid, const std::filesystem::path& path, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(path)) {
    siginfo_t info{};
    // WNOWAIT: only look, so wait() can still collect the status.
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      return false;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace dlock::cli::testing
