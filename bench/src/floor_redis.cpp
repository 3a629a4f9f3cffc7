// The Redis wire floor: a lock done by hand with hiredis, the way every Redis lock works
// at minimum — SET key token NX PX, then a compare-and-delete script — plus a bare PING.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <random>
#include <stdexcept>

#include "bench_lua.h"
#include "floor.h"
#include "loop.h"
#include "redis_wire.h"

namespace dlock_bench {

Floor measure_redis_floor(const dlock::Uri& uri, const Settings& settings) {
  RedisWire wire(uri);
  Floor f;
  f.wire = true;
  f.ping_label = "raw hiredis PING (1 RT)";
  f.ping = time_loop(settings.warmup, settings.iterations, settings.loop_cap, [&] {
    wire.command({"PING"});
  });

  ReplyPtr loaded = wire.command_ok({"SCRIPT", "LOAD", kCompareAndDeleteLua});
  if (loaded->type != REDIS_REPLY_STRING) throw std::runtime_error("SCRIPT LOAD: unexpected reply");
  const std::string sha(loaded->str, loaded->len);
  const std::string key = "dlock-bench:floor:" + std::to_string(getpid());
  const std::string token = std::to_string(std::random_device{}()) + std::to_string(std::random_device{}());

  f.lock_label = "raw hiredis SET NX PX + EVALSHA release (2 RT)";
  f.lock = time_loop(settings.warmup, settings.iterations, settings.loop_cap, [&] {
    ReplyPtr set = wire.command({"SET", key, token, "NX", "PX", "30000"});
    if (set->type != REDIS_REPLY_STATUS) throw std::runtime_error("floor SET NX: key was taken");
    ReplyPtr del = wire.command({"EVALSHA", sha, "1", key, token});
    if (del->type != REDIS_REPLY_INTEGER || del->integer != 1)
      throw std::runtime_error("floor EVALSHA release did not delete the key");
  });
  return f;
}

}  // namespace dlock_bench
