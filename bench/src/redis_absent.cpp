// Built instead of the hiredis files (redis_wire, redis_monitor, floor_redis) when hiredis is
// missing, so dlock-bench still measures mem:// and file://. Every entry point that would
// talk to Redis throws; the rest is never reached without a RedisWire (which cannot exist).
#include <stdexcept>

#include "floor.h"
#include "floor_redis_handoff.h"
#include "redis_monitor.h"
#include "redis_wire.h"

namespace dlock_bench {
namespace {

[[noreturn]] void no_hiredis() {
  throw std::runtime_error("this dlock-bench was built without hiredis: no redis:// measurements");
}

}  // namespace

void ReplyDeleter::operator()(redisReply*) const noexcept {}
RedisWire::RedisWire(const dlock::Uri&, std::chrono::milliseconds) { no_hiredis(); }
RedisWire::~RedisWire() = default;
ReplyPtr RedisWire::command(const std::vector<std::string_view>&) { no_hiredis(); }
ReplyPtr RedisWire::command_ok(const std::vector<std::string_view>&) { no_hiredis(); }
std::map<std::string, std::string> RedisWire::info(std::string_view) { no_hiredis(); }
CommandCounts read_command_counts(RedisWire&) { no_hiredis(); }
CommandDelta operator-(const CommandCounts&, const CommandCounts&) { no_hiredis(); }
std::string CommandDelta::top(std::size_t, double) const { no_hiredis(); }
std::string top_commands(const std::map<std::string, std::uint64_t>&, std::size_t, double) { no_hiredis(); }

RedisMonitor::RedisMonitor(const dlock::Uri&) { no_hiredis(); }
RedisMonitor::~RedisMonitor() = default;
Traffic RedisMonitor::stop() { no_hiredis(); }
void RedisMonitor::read_loop() noexcept {}
std::string Traffic::top(std::size_t, double) const { no_hiredis(); }

Floor make_redis_floor(const dlock::Uri&) { no_hiredis(); }
RedisHandoffFloor run_redis_handoff_floor(const dlock::Uri&, const Settings&, RedisFloorKind, Report&) { no_hiredis(); }
void add_redis_handoff_ratios(const RedisHandoffFloor&, Report&) { no_hiredis(); }

}  // namespace dlock_bench
