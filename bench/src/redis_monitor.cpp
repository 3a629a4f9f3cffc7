#include "redis_monitor.h"

#include <hiredis/hiredis.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "clock.h"
#include "redis_wire.h"

namespace dlock_bench {

namespace {

double thread_cpu_seconds() noexcept {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return cpu_seconds(ru);
}

// A MONITOR line: `1700000000.123456 [0 127.0.0.1:5555] "evalsha" "…" …` or `[0 lua] "get" …`.
struct Line {
  bool from_script = false;
  std::string command;  // lower-case
  std::string first_arg;
};

bool parse_line(std::string_view s, Line& out) {
  auto open = s.find('[');
  auto close = s.find(']', open == std::string_view::npos ? 0 : open);
  if (open == std::string_view::npos || close == std::string_view::npos) return false;
  std::string_view source = s.substr(open + 1, close - open - 1);
  out.from_script = source.ends_with(" lua");
  auto q1 = s.find('"', close);
  auto q2 = q1 == std::string_view::npos ? q1 : s.find('"', q1 + 1);
  if (q2 == std::string_view::npos) return false;
  out.command.assign(s.substr(q1 + 1, q2 - q1 - 1));
  for (char& c : out.command) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto q3 = s.find('"', q2 + 1);
  auto q4 = q3 == std::string_view::npos ? q3 : s.find('"', q3 + 1);
  out.first_arg = q4 == std::string_view::npos ? "" : std::string(s.substr(q3 + 1, q4 - q3 - 1));
  return true;
}

}  // namespace

std::string Traffic::top(std::size_t n, double per) const { return top_commands(by_command, n, per); }

RedisMonitor::RedisMonitor(const dlock::Uri& uri) {
  control_ = std::make_unique<RedisWire>(uri);
  const std::string tag = "dlock-bench-marker-" + std::to_string(getpid()) + "-" + std::to_string(mono_ns());
  start_marker_ = tag + "-start";
  end_marker_ = tag + "-end";

  RedisWire stream_wire(uri);  // reuses the connect/AUTH/SELECT logic, then hands the context over
  stream_ = stream_wire.release_context();
  redisSetTimeout(stream_, timeval{0, 0});  // block: the end marker (or shutdown) always ends the read
  if (!ReplyPtr(static_cast<redisReply*>(redisCommand(stream_, "MONITOR")))) {
    redisFree(stream_);
    stream_ = nullptr;
    throw std::runtime_error("MONITOR failed");
  }
  reader_ = std::thread([this] { read_loop(); });
  control_->command_ok({"ECHO", start_marker_});
  const std::uint64_t deadline = mono_ns() + 5'000'000'000ull;
  while (phase_.load() == 0 && mono_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (phase_.load() != 1) {
    ::shutdown(stream_->fd, SHUT_RDWR);
    reader_.join();
    redisFree(stream_);
    stream_ = nullptr;
    throw std::runtime_error("MONITOR never showed the start marker");
  }
}

RedisMonitor::~RedisMonitor() {
  if (reader_.joinable()) {
    ::shutdown(stream_->fd, SHUT_RDWR);  // unblocks the reader
    reader_.join();
  }
  if (stream_) redisFree(stream_);
}

void RedisMonitor::read_loop() noexcept {
  const double cpu0 = thread_cpu_seconds();
  Line line;
  for (;;) {
    void* raw = nullptr;
    if (redisGetReply(stream_, &raw) != REDIS_OK || raw == nullptr) {
      phase_.store(3);
      break;
    }
    const ReplyPtr r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_STATUS && parse_line(std::string_view(r->str, r->len), line)) {
      int phase = phase_.load();
      if (line.command == "echo" && line.first_arg == start_marker_) {
        phase_.store(1);
      } else if (line.command == "echo" && line.first_arg == end_marker_) {
        traffic_.reader_cpu_s = thread_cpu_seconds() - cpu0;
        phase_.store(2);
        return;
      } else if (phase == 1) {
        if (line.from_script) {
          ++traffic_.script_calls;
        } else if (line.command != "info") {
          ++traffic_.requests;
          ++traffic_.by_command[line.command];
        }
      }
    }
  }
  traffic_.reader_cpu_s = thread_cpu_seconds() - cpu0;
}

Traffic RedisMonitor::stop() {
  if (!reader_.joinable()) throw std::runtime_error("MONITOR already stopped");
  try {
    control_->command_ok({"ECHO", end_marker_});
  } catch (const std::exception&) {
    // The reader is unblocked below either way.
  }
  const std::uint64_t deadline = mono_ns() + 10'000'000'000ull;
  while (phase_.load() < 2 && mono_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (phase_.load() < 2) ::shutdown(stream_->fd, SHUT_RDWR);
  reader_.join();
  if (phase_.load() != 2) throw std::runtime_error("the MONITOR stream broke before the end marker");
  return traffic_;
}

}  // namespace dlock_bench
