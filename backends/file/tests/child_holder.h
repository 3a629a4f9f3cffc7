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
  enum class Start { holding, waiting };

  // Starts the holder; with Start::holding returns once it printed its token (it then holds
  // the lock), with Start::waiting at once (it may still wait; read_token() tells).
  ChildHolder(const std::string& uri, const std::string& name, const std::string& mode,
              Start start = Start::holding) {
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
    if (out_ == nullptr) {
      kill();
      throw std::runtime_error("fdopen");
    }
    if (start == Start::holding) read_token();
  }
  ~ChildHolder() {
    kill();
    if (out_ != nullptr) std::fclose(out_);
  }
  ChildHolder(const ChildHolder&) = delete;
  ChildHolder& operator=(const ChildHolder&) = delete;

  std::uint64_t token() const { return token_; }
  // Blocks until the holder printed its token (it holds the lock) and returns it.
  std::uint64_t read_token() {
    unsigned long long token = 0;
    if (std::fscanf(out_, "token %llu", &token) != 1) {
      kill();
      throw std::runtime_error("holder did not print a token");
    }
    token_ = token;
    return token_;
  }
  // SIGSTOP, returning once the holder is stopped; SIGCONT.
  void stop() {
    ::kill(pid_, SIGSTOP);
    int status = 0;
    ::waitpid(pid_, &status, WUNTRACED);
  }
  void resume() { ::kill(pid_, SIGCONT); }
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
