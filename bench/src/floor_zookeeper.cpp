// The zk:// floor, by hand with the raw ZooKeeper C client (synchronous API, -DTHREADED):
// ping = exists (1 round trip); lock = create EPHEMERAL_SEQUENTIAL + delete (2 requests,
// both quorum writes): the least any correct ephemeral-node lock can do per acquire+release.
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "floor.h"

namespace dlock_bench {
namespace {

void quiet(zhandle_t*, int, int, const char*, void*) {}

struct ZkFloorState {
  zhandle_t* zh = nullptr;
  std::string parent = "/dlock-bench-floor";
  ~ZkFloorState() {
    if (zh != nullptr) zookeeper_close(zh);
  }
};

}  // namespace

std::string zookeeper_hosts(const dlock::Uri& uri) {
  std::string hosts;
  for (const auto& h : uri.hosts) {
    if (!hosts.empty()) hosts += ',';
    hosts += h.host + ":" + std::to_string(h.port ? h.port : 2181);
  }
  return hosts;
}

// A connected raw handle on `uri`'s hosts (digest credentials added if the URI has them).
std::shared_ptr<void> zookeeper_raw_handle(const dlock::Uri& uri, zhandle_t** out) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  auto st = std::make_shared<ZkFloorState>();
  st->zh = zookeeper_init(zookeeper_hosts(uri).c_str(), &quiet, 10000, nullptr, nullptr, 0);
  if (st->zh == nullptr) throw std::runtime_error("zookeeper floor: zookeeper_init failed");
  // As the backend does: no host-name resolution around every request (the client's
  // default), so the floor is the least the C client can do, not the default's cost.
  zoo_set_servers_resolution_delay(st->zh, 60000);
  if (uri.password) {
    const std::string cert = uri.user + ":" + *uri.password;
    zoo_add_auth(st->zh, "digest", cert.data(), static_cast<int>(cert.size()), nullptr, nullptr);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (zoo_state(st->zh) != ZOO_CONNECTED_STATE) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("zookeeper floor: no session");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  *out = st->zh;
  return st;
}

Floor make_zookeeper_floor(const dlock::Uri& uri) {
  zhandle_t* zh = nullptr;
  auto handle = zookeeper_raw_handle(uri, &zh);
  const std::string parent = "/dlock-bench-floor";
  const int rc = zoo_create(zh, parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  if (rc != ZOK && rc != ZNODEEXISTS) throw std::runtime_error(std::string("zookeeper floor: ") + zerror(rc));
  Floor f;
  f.wire = true;
  f.state = handle;
  f.ping_label = "raw C client exists (1 RT)";
  f.ping = [zh, parent] {
    Stat st{};
    if (zoo_exists(zh, parent.c_str(), 0, &st) != ZOK) throw std::runtime_error("zookeeper floor: exists failed");
  };
  f.lock_label = "raw C client create ephemeral-seq + delete (2 requests)";
  f.lock = [zh, prefix = parent + "/x-"] {
    char path[256];
    if (zoo_create(zh, prefix.c_str(), "o", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, path,
                   sizeof path) != ZOK) {
      throw std::runtime_error("zookeeper floor: create failed");
    }
    if (zoo_delete(zh, path, -1) != ZOK) throw std::runtime_error("zookeeper floor: delete failed");
  };
  return f;
}

}  // namespace dlock_bench
