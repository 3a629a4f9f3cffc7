// redis://: the test server named by DLOCK_TEST_REDIS_URI (scripts/servers.sh start redis).
//
// Each case gets its own key prefix "conf-<pid>-<n>:"; the saboteur deletes that prefix's
// lock keys with raw hiredis (keeping the fencing counters, as a lost key would), and the
// server is restarted through $DLOCK_SERVERS_SCRIPT.
#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/uri.h"
#include "framework/backend_context.h"
#include "hiredis_ptr.h"

namespace dlock::conformance {
namespace {

using redis::ContextPtr;
using ReplyPtr = redis::Reply;

std::string base_uri() {
  const char* v = std::getenv("DLOCK_TEST_REDIS_URI");
  if (v == nullptr || *v == '\0') throw std::runtime_error("DLOCK_TEST_REDIS_URI not set");
  return v;
}

class RedisEnv final : public BackendEnv {
 public:
  RedisEnv() : base_(Uri::parse(base_uri())) {
    if (base_.hosts.empty()) throw std::runtime_error("DLOCK_TEST_REDIS_URI has no host");
    static std::atomic<int> counter{0};
    prefix_ = "conf-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ":";
    // An initialised deployment: without its data-loss marker the first acquire under a
    // fresh prefix would wait out the pause after data loss (backends/redis/README.md).
    auto c = connect();
    const std::string marker = prefix_ + "epoch";
    const char* argv[] = {"SET", marker.c_str(), "0"};
    ReplyPtr r = redis::take_reply(redisCommandArgv(c.get(), 3, argv, nullptr));
    if (!r || r->type == REDIS_REPLY_ERROR) throw std::runtime_error("redis env: cannot mark the dataset");
  }

  ~RedisEnv() override {
    try {
      delete_keys(/*keep_counters=*/false);
    } catch (...) {
    }
  }

  std::string uri(const UriOptions& options) const override {
    std::string u = "redis://";
    if (base_.password) u += (base_.user.empty() ? "" : base_.user) + ":" + *base_.password + "@";
    u += base_.hosts[0].host + ":" +
         std::to_string(options.via_port ? *options.via_port : port());
    u += base_.path.empty() ? "/" : base_.path;
    u += "?prefix=" + prefix_ + "&lease=1s&connect_timeout=500ms&command_timeout=500ms";
    for (const auto& [k, v] : base_.params) {
      if (k != "prefix" && k != "lease" && k != "connect_timeout" && k != "command_timeout") {
        u += "&" + k + "=" + v;
      }
    }
    return u;
  }

  void sabotage(std::string_view) override {
    if (delete_keys(/*keep_counters=*/true) == 0) {
      throw std::runtime_error("redis saboteur: no key under prefix " + prefix_);
    }
  }

  // Left behind = a holder or queue entry (they affect the next acquirer) or any key that
  // would never expire. Fencing counters and the data-loss marker stay by design; helper
  // keys with a TTL (release latches, arrival counters) expire by themselves and are not
  // counted.
  std::vector<std::string> residue() const override {
    auto c = connect();
    std::vector<std::string> keys;
    for_each_key([&](const std::string& key) {
      if (is_counter(key) || is_marker(key)) return;
      const bool blocking = key.back() == '}' || key.ends_with(":q");
      if (!blocking) {
        const char* argv[] = {"PTTL", key.c_str()};
        const size_t lens[] = {4, key.size()};
        ReplyPtr r = redis::take_reply(redisCommandArgv(c.get(), 2, argv, lens));
        if (r && r->type == REDIS_REPLY_INTEGER && r->integer > 0) return;
      }
      keys.push_back(key);
    });
    return keys;
  }

  std::optional<HostPort> server() const override { return HostPort{base_.hosts[0].host, port()}; }

  void restart_server() override {
    const char* script = std::getenv("DLOCK_SERVERS_SCRIPT");
    if (script == nullptr || *script == '\0') script = DLOCK_DEFAULT_SERVERS_SCRIPT;
    const std::string cmd = std::string("timeout 30 '") + script + "' restart redis >/dev/null 2>&1";
    const int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("'" + std::string(script) + " restart redis' failed");
  }

 private:
  std::uint16_t port() const { return base_.hosts[0].port ? base_.hosts[0].port : 6379; }

  ContextPtr connect() const {
    timeval tv{2, 0};
    ContextPtr c(redisConnectWithTimeout(base_.hosts[0].host.c_str(), port(), tv));
    if (!c || c->err) throw std::runtime_error("redis saboteur: cannot connect");
    redisSetTimeout(c.get(), tv);
    auto cmd = [&](std::vector<std::string> args) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const auto& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      ReplyPtr r = redis::take_reply(redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data()));
      if (!r || r->type == REDIS_REPLY_ERROR) throw std::runtime_error("redis saboteur: command failed");
    };
    if (base_.password) {
      if (base_.user.empty()) {
        cmd({"AUTH", *base_.password});
      } else {
        cmd({"AUTH", base_.user, *base_.password});
      }
    }
    if (!base_.path.empty() && base_.path != "/") cmd({"SELECT", base_.path.substr(1)});
    return c;
  }

  static bool is_counter(const std::string& key) {
    return key.size() >= 2 && key.compare(key.size() - 2, 2, ":t") == 0;
  }

  bool is_marker(const std::string& key) const { return key == prefix_ + "epoch"; }

  // Deletes the keys under the prefix (all, or the lock keys only: a lost lock key keeps
  // the fencing counters "…:t" and the data-loss marker).
  int delete_keys(bool keep_counters) const {
    auto c = connect();
    int deleted = 0;
    for_each_key([&](const std::string& key) {
      if (keep_counters && (is_counter(key) || is_marker(key))) return;
      const char* del[] = {"DEL", key.c_str()};
      const size_t lens[] = {3, key.size()};
      ReplyPtr d = redis::take_reply(redisCommandArgv(c.get(), 2, del, lens));
      if (d && d->type == REDIS_REPLY_INTEGER) deleted += static_cast<int>(d->integer);
    });
    return deleted;
  }

  // Calls f(key) for every key under the prefix.
  template <class F>
  void for_each_key(F f) const {
    auto c = connect();
    std::string cursor = "0";
    const std::string match = prefix_ + "*";
    do {
      const char* argv[] = {"SCAN", cursor.c_str(), "MATCH", match.c_str(), "COUNT", "1000"};
      ReplyPtr r = redis::take_reply(redisCommandArgv(c.get(), 6, argv, nullptr));
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        throw std::runtime_error("redis saboteur: SCAN failed");
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      const auto* keys = r->element[1];
      for (size_t i = 0; i < keys->elements; ++i) {
        f(std::string(keys->element[i]->str, keys->element[i]->len));
      }
    } while (cursor != "0");
  }

  Uri base_;
  std::string prefix_;
};

BackendContext make() {
  BackendContext c;
  c.backend = "redis";
  c.scheme = "redis";
  c.claims.reentrant = true;
  c.claims.read_write = true;
  c.claims.fair = true;
  c.claims.fencing = true;
  c.claims.push_wakeup = true;
  c.claims.liveness = Liveness::lease;
  c.claims.cross_process = true;
  c.claims.network_faults = true;
  c.claims.server_restart = true;
  c.short_lease = std::chrono::milliseconds(1000);
  c.tolerance = std::chrono::milliseconds(500);
  c.malformed_uris = {{"redis://127.0.0.1:99999", "port"},
                      {"redis://127.0.0.1:0x10", "port"},
                      {"redis://", "host"},
                      {"redis://127.0.0.1:16379/0?bogus=1", "bogus"},
                      {"redis://127.0.0.1:16379/zero", "database"},
                      {"redis://127.0.0.1:16379/0?prefix=a{b}", "prefix"},
                      {"redis://127.0.0.1:16379/0?lease=fast", "lease"}};
  c.closed_port_uri = [](std::uint16_t port) {
    return "redis://127.0.0.1:" + std::to_string(port) + "/0?connect_timeout=500ms&command_timeout=500ms";
  };
  c.make_env = [] { return std::make_unique<RedisEnv>(); };
  return c;
}

const Registrar registrar(&make);

}  // namespace
}  // namespace dlock::conformance
