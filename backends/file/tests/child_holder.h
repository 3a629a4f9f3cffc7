// ChildHolder: runs dlock_file_holder in a child process and reads the token it prints.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace dlock::file::testing {

class ChildHolder {
 public:
  // Starts the holder; returns once it printed its token (it then holds the lock).
  ChildHolder(const std::string& uri, const std::string& name, const std::string& mode) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      ::dup2(fds[1], 1);
      const char* argv[] = {DLOCK_FILE_HOLDER, uri.c_str(), name.c_str(), mode.c_str(), nullptr};
      ::execv(DLOCK_FILE_HOLDER, const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
    unsigned long long token = 0;
    if (out_ == nullptr || std::fscanf(out_, "token %llu", &token) != 1) {
      kill();
      throw std::runtime_error("holder did not print a token");
    }
    token_ = token;
  }
  ~ChildHolder() {
    kill();
    if (out_ != nullptr) std::fclose(out_);
  }
  ChildHolder(const ChildHolder&) = delete;
  ChildHolder& operator=(const ChildHolder&) = delete;

  std::uint64_t token() const { return token_; }
  // SIGKILL and reap; idempotent.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  std::FILE* out_ = nullptr;
  std::uint64_t token_ = 0;
};

}  // namespace dlock::file::testing
