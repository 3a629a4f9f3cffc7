// A raw hiredis connection for the floor and for reading the server's counters. It bypasses
// dlock entirely: it is what dlock is measured against.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/uri.h"

struct redisContext;
struct redisReply;

namespace dlock_bench {

// Declared without hiredis (the bench builds without it, see redis_absent.cpp); with
// hiredis, redis_wire.cpp defines it as the backend's hiredis_ptr.h deleter.
struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept;
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// One blocking connection. Not thread-safe. Errors throw std::runtime_error whose message
// names the host and port, never the password.
class RedisWire {
 public:
  // Connects to the host and port of a redis:// URI, AUTHs with its user/password and
  // SELECTs its database (the path, e.g. "/0").
  explicit RedisWire(const dlock::Uri& uri, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~RedisWire();
  RedisWire(const RedisWire&) = delete;
  RedisWire& operator=(const RedisWire&) = delete;

  // Sends one command and reads its reply; an error reply is returned, not thrown.
  ReplyPtr command(const std::vector<std::string_view>& argv);
  // As command(), but throws unless the reply is a status "OK"/"PONG" or an integer/string.
  ReplyPtr command_ok(const std::vector<std::string_view>& argv);

  // Hands the connection over to the caller (who must redisFree it); *this is then unusable.
  redisContext* release_context() noexcept {
    redisContext* c = ctx_;
    ctx_ = nullptr;
    return c;
  }

  // INFO <section> parsed into key -> value lines.
  std::map<std::string, std::string> info(std::string_view section);

 private:
  std::string where_;
  redisContext* ctx_ = nullptr;
};

// Redis's own count of the commands it ran: for round trips per renewal tick.
struct CommandCounts {
  std::uint64_t total = 0;    // INFO stats total_commands_processed
  std::uint64_t scripts = 0;  // calls of eval, evalsha, eval_ro, evalsha_ro, fcall, fcall_ro
  // INFO commandstats usec of those calls: the server's time inside scripts, the commands
  // they ran included.
  std::uint64_t script_usec = 0;
  std::uint64_t info = 0;     // calls of INFO (ours, to subtract; 3 per reading)
  // INFO stats total_reads_processed: read events on client sockets. A pipelined batch
  // arrives in one or a few reads, so this bounds the round trips clients started.
  std::uint64_t reads = 0;
  std::map<std::string, std::uint64_t> calls;  // every command's calls, by name
  double server_cpu_s = 0;    // INFO cpu: the server's main thread, user+sys
};

// What the server ran between two readings, our INFO calls taken out.
struct CommandDelta {
  double total = 0;
  double scripts = 0;
  double script_usec = 0;   // the server's time inside scripts
  double reads = 0;         // read events, our INFO calls taken out: >= client round trips
  double server_cpu_s = 0;  // the server's main thread
  std::map<std::string, std::uint64_t> calls;  // per command, INFO excluded
  // The `n` commands called most, as "evalsha 10, pexpire 3" (each divided by `per`).
  std::string top(std::size_t n, double per) const;
};
CommandDelta operator-(const CommandCounts& after, const CommandCounts& before);
CommandCounts read_command_counts(RedisWire& wire);

// "evalsha 2.00, incr 1.00": the n most frequent commands in `counts`, each divided by `per`.
std::string top_commands(const std::map<std::string, std::uint64_t>& counts, std::size_t n, double per);

}  // namespace dlock_bench
