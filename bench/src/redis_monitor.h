// Counting the requests clients send to a Redis server, apart from the commands scripts run
// inside the server: INFO commandstats counts both, MONITOR tells them apart.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "dlock/uri.h"
#include "redis_wire.h"

namespace dlock_bench {

struct Traffic {
  std::uint64_t requests = 0;      // commands sent by clients (INFO excluded)
  std::uint64_t script_calls = 0;  // commands run by scripts (redis.call)
  std::map<std::string, std::uint64_t> by_command;  // requests per command name
  double reader_cpu_s = 0;         // CPU our MONITOR reader thread used (to subtract)
  // The `n` most sent commands as "evalsha 1.00, get 0.50" (each divided by `per`).
  std::string top(std::size_t n, double per) const;
};

// Watches the server from construction to stop(). MONITOR slows the server: never run it
// while latency is being timed. Not thread-safe. Counts are server-wide: on a shared server
// they include other clients' traffic.
class RedisMonitor {
 public:
  // Connects twice (MONITOR stream + markers), starts the reader thread and waits until it
  // sees the start marker. Throws std::runtime_error.
  explicit RedisMonitor(const dlock::Uri& uri);
  ~RedisMonitor();
  RedisMonitor(const RedisMonitor&) = delete;
  RedisMonitor& operator=(const RedisMonitor&) = delete;

  // Sends the end marker, waits (bounded) for the reader to see it and returns what was
  // counted between the markers. Throws std::runtime_error if the stream broke.
  Traffic stop();

 private:
  void read_loop() noexcept;

  std::unique_ptr<RedisWire> control_;
  redisContext* stream_ = nullptr;
  std::string start_marker_, end_marker_;
  std::atomic<int> phase_{0};  // 0 before start marker, 1 counting, 2 end marker seen, 3 broken
  Traffic traffic_;            // written by the reader until phase_ >= 2
  std::thread reader_;
};

}  // namespace dlock_bench
