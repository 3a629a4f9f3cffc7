// Test helper: runs the `dlock` binary as a child process and collects what it did.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dlock::cli::testing {

// How a process ended.
struct Finished {
  bool exited = false;  // false: killed by a signal (then `code` is 128+signal), or timed out
  bool timed_out = false;
  int code = -1;
  std::string out, err;
  std::chrono::milliseconds elapsed{0};
};

// A temp dir, removed at destruction, holding the processes' output files.
class Sandbox {
 public:
  Sandbox();
  ~Sandbox();
  const std::filesystem::path& dir() const { return dir_; }
  // "file://<dir>/locks".
  std::string file_uri() const;

  // Starts DLOCK_CLI_PATH with `args`, stdout/stderr into files. The environment is this
  // process's, minus DLOCK_URI, with XDG_RUNTIME_DIR=<dir>, then `env` applied (an empty
  // value unsets the variable).
  pid_t start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});
  // The same for any program: `argv[0]` is looked up in $PATH (as posix_spawnp does).
  // REQUIRES: argv is not empty.
  pid_t start_program(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env = {});
  // The file a process started here writes its stderr into (it stays after wait()).
  std::filesystem::path stderr_path(pid_t pid) const;
  // Waits at most `limit` for `pid` (SIGKILLs it and reports timed_out after that).
  Finished wait(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(20));
  // Waits up to `limit` for `path` to exist; false at once if `pid` exits first.
  bool wait_ready(pid_t pid, const std::filesystem::path& path,
                  std::chrono::milliseconds limit = std::chrono::seconds(10));
  // start() then wait().
  Finished run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
               std::chrono::milliseconds limit = std::chrono::seconds(20));

 private:
  std::filesystem::path dir_;
  std::map<pid_t, std::pair<std::chrono::steady_clock::time_point, int>> started_;  // pid → start, index
  int next_ = 0;
};

std::string read_file(const std::filesystem::path& path);

}  // namespace dlock::cli::testing
