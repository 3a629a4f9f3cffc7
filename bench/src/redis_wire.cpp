#include "redis_wire.h"

#include "hiredis_ptr.h"  // backends/redis/src: the one deleter

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace dlock_bench {

void ReplyDeleter::operator()(redisReply* r) const noexcept { dlock::redis::ReplyDeleter{}(r); }

namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

}  // namespace

RedisWire::RedisWire(const dlock::Uri& uri, std::chrono::milliseconds timeout) {
  std::string host = uri.hosts.empty() || uri.hosts[0].host.empty() ? "127.0.0.1" : uri.hosts[0].host;
  int port = uri.hosts.empty() || uri.hosts[0].port == 0 ? 6379 : uri.hosts[0].port;
  where_ = host + ":" + std::to_string(port);
  ctx_ = redisConnectWithTimeout(host.c_str(), port, to_timeval(timeout));
  if (ctx_ == nullptr || ctx_->err) {
    std::string why = ctx_ ? ctx_->errstr : "out of memory";
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    throw std::runtime_error("redis " + where_ + ": cannot connect: " + why);
  }
  // The connect timeout does not cover reads.
  redisSetTimeout(ctx_, to_timeval(timeout));
  if (uri.password) {
    if (uri.user.empty()) {
      command_ok({"AUTH", *uri.password});
    } else {
      command_ok({"AUTH", uri.user, *uri.password});
    }
  }
  if (uri.path.size() > 1) command_ok({"SELECT", std::string_view(uri.path).substr(1)});
}

RedisWire::~RedisWire() {
  if (ctx_) redisFree(ctx_);
}

ReplyPtr RedisWire::command(const std::vector<std::string_view>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (auto a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
  if (!reply) {
    throw std::runtime_error("redis " + where_ + ": " + (ctx_->err ? ctx_->errstr : "no reply"));
  }
  return reply;
}

ReplyPtr RedisWire::command_ok(const std::vector<std::string_view>& argv) {
  ReplyPtr r = command(argv);
  if (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_NIL) {
    // The command name only: arguments may hold a password (AUTH).
    std::string what = r->type == REDIS_REPLY_NIL ? "nil reply" : std::string(r->str, r->len);
    throw std::runtime_error("redis " + where_ + ": " + std::string(argv.at(0)) + ": " + what);
  }
  return r;
}

std::map<std::string, std::string> RedisWire::info(std::string_view section) {
  ReplyPtr r = command_ok({"INFO", section});
  std::map<std::string, std::string> out;
  std::string_view text(r->str, r->len);
  while (!text.empty()) {
    auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto colon = line.find(':');
    if (line.empty() || line[0] == '#' || colon == std::string_view::npos) continue;
    out.emplace(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
  }
  return out;
}

namespace {

// "calls=12,usec=34,..." -> 12 for field "calls=".
std::uint64_t field_of(const std::map<std::string, std::string>& stats, const std::string& cmd,
                       const std::string& field) {
  auto it = stats.find("cmdstat_" + cmd);
  if (it == stats.end()) return 0;
  const std::string& v = it->second;
  auto pos = v.find(field);
  if (pos == std::string::npos) return 0;
  return std::stoull(v.substr(pos + field.size()));
}

std::uint64_t calls_of(const std::map<std::string, std::string>& stats, const std::string& cmd) {
  return field_of(stats, cmd, "calls=");
}

}  // namespace

CommandCounts read_command_counts(RedisWire& wire) {
  CommandCounts c;
  auto cmd = wire.info("commandstats");
  for (const auto& [key, value] : cmd) {
    if (key.starts_with("cmdstat_")) c.calls[key.substr(8)] = calls_of(cmd, key.substr(8));
  }
  for (const char* s : {"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}) {
    c.scripts += calls_of(cmd, s);
    c.script_usec += field_of(cmd, s, "usec=");  // the first "usec=": not usec_per_call
  }
  c.info = calls_of(cmd, "info");
  auto stats = wire.info("stats");
  auto it = stats.find("total_commands_processed");
  if (it == stats.end()) throw std::runtime_error("INFO stats has no total_commands_processed");
  c.total = std::stoull(it->second);
  if (auto r = stats.find("total_reads_processed"); r != stats.end()) c.reads = std::stoull(r->second);
  auto cpu = wire.info("cpu");
  auto num = [&](const char* k) { return cpu.count(k) ? std::stod(cpu[k]) : 0.0; };
  c.server_cpu_s = num("used_cpu_user_main_thread") + num("used_cpu_sys_main_thread");
  return c;
}

CommandDelta operator-(const CommandCounts& after, const CommandCounts& before) {
  CommandDelta d;
  // Our own INFO calls are counted by the server too.
  d.total = static_cast<double>(after.total - before.total) - static_cast<double>(after.info - before.info);
  d.scripts = static_cast<double>(after.scripts - before.scripts);
  d.script_usec = static_cast<double>(after.script_usec - before.script_usec);
  d.reads = static_cast<double>(after.reads - before.reads) - static_cast<double>(after.info - before.info);
  d.server_cpu_s = after.server_cpu_s - before.server_cpu_s;
  for (const auto& [name, n] : after.calls) {
    auto it = before.calls.find(name);
    std::uint64_t diff = n - (it == before.calls.end() ? 0 : it->second);
    if (diff != 0 && name != "info") d.calls[name] = diff;
  }
  return d;
}

std::string CommandDelta::top(std::size_t n, double per) const { return top_commands(calls, n, per); }

std::string top_commands(const std::map<std::string, std::uint64_t>& counts, std::size_t n, double per) {
  std::vector<std::pair<std::uint64_t, std::string>> v;
  for (const auto& [name, count] : counts) v.emplace_back(count, name);
  std::sort(v.rbegin(), v.rend());
  std::string out;
  char buf[64];
  for (std::size_t i = 0; i < v.size() && i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(v[i].first) / per);
    out += (out.empty() ? "" : ", ") + v[i].second + " " + buf;
  }
  return out.empty() ? "none" : out;
}

}  // namespace dlock_bench
