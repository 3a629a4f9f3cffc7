// The floor: what the lock service costs without dlock, done by hand with the raw client.
// dlock's figures are reported as ratios against it, measured in the same run and
// interleaved with dlock's own loop so that both see the same machine load.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dlock/uri.h"

namespace dlock_bench {

struct Floor {
  std::string ping_label;       // e.g. "raw hiredis PING (1 RT)"
  std::function<void()> ping;   // one round trip; empty for backends without a wire
  std::string lock_label;       // e.g. "raw hiredis SET NX PX + EVALSHA release (2 RT)"
  std::function<void()> lock;   // the cheapest correct acquire+release by hand; may be empty
  bool wire = false;            // a network floor: the "dlock p50 <= 1.10 x floor" target applies
  std::shared_ptr<void> state;  // what the operations use (a connection, a map)
};

// Prepares the floor of `uri`'s backend: redis (hiredis), file (open + OFD lock + close),
// mem (a mutex-guarded map). Unknown schemes get an empty Floor. Throws std::exception when
// the server cannot be reached. Operations throw std::exception when the server misbehaves.
Floor make_floor(const dlock::Uri& uri);

Floor make_redis_floor(const dlock::Uri& uri);
Floor make_file_floor(const dlock::Uri& uri);
Floor make_mem_floor();
Floor make_postgres_floor(const dlock::Uri& uri);
Floor make_zookeeper_floor(const dlock::Uri& uri);  // floor_zookeeper.cpp (zk:// builds only)
Floor make_mysql_floor(const dlock::Uri& uri);  // floor_mysql.cpp

}  // namespace dlock_bench
