// The Redis wire floor: a lock done by hand with hiredis, the way every Redis lock works
// at minimum — SET key token NX PX, then a compare-and-delete script — plus a bare PING.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <random>
#include <stdexcept>

#include "bench_lua.h"
#include "floor.h"
#include "redis_wire.h"

namespace dlock_bench {

namespace {

struct RedisFloorState {
  explicit RedisFloorState(const dlock::Uri& uri) : wire(uri) {}
  RedisWire wire;
  std::string sha, key, token;
};

}  // namespace

Floor make_redis_floor(const dlock::Uri& uri) {
  auto st = std::make_shared<RedisFloorState>(uri);
  ReplyPtr loaded = st->wire.command_ok({"SCRIPT", "LOAD", kCompareAndDeleteLua});
  if (loaded->type != REDIS_REPLY_STRING) throw std::runtime_error("SCRIPT LOAD: unexpected reply");
  st->sha.assign(loaded->str, loaded->len);
  st->key = "dlock-bench:floor:" + std::to_string(getpid());
  st->token = std::to_string(std::random_device{}()) + std::to_string(std::random_device{}());

  Floor f;
  f.wire = true;
  f.state = st;
  RedisFloorState* s = st.get();
  f.ping_label = "raw hiredis PING (1 RT)";
  f.ping = [s] { s->wire.command_ok({"PING"}); };
  f.lock_label = "raw hiredis SET NX PX + EVALSHA release (2 RT)";
  f.lock = [s] {
    ReplyPtr set = s->wire.command({"SET", s->key, s->token, "NX", "PX", "30000"});
    if (set->type != REDIS_REPLY_STATUS) throw std::runtime_error("floor SET NX: key was taken");
    ReplyPtr del = s->wire.command({"EVALSHA", s->sha, "1", s->key, s->token});
    if (del->type != REDIS_REPLY_INTEGER || del->integer != 1)
      throw std::runtime_error("floor EVALSHA release did not delete the key");
  };
  return f;
}

}  // namespace dlock_bench
