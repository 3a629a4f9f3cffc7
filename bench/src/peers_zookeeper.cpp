// zk:// side-by-side lines: the 3-request cycle Curator and kazoo do (raw C client: create
// ephemeral-seq + get_children + delete), and the peers themselves, kazoo's Lock
// (python3-kazoo) and Curator's InterProcessMutex (libcurator-*-java, run as a single-file
// Java program). A peer that is not installed is noted, not an error.
#include <zookeeper/zookeeper.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "peers.h"
#include "sections.h"

namespace dlock_bench {

std::string zookeeper_hosts(const dlock::Uri& uri);                                  // floor_zookeeper.cpp
std::shared_ptr<void> zookeeper_raw_handle(const dlock::Uri& uri, zhandle_t** out);  // floor_zookeeper.cpp

namespace {

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(std::max(1.0, p / 100.0 * static_cast<double>(v.size()) + 0.999999));
  return v[std::min(v.size(), k) - 1];
}

void cycle3(const dlock::Uri& uri, const Settings& settings, Report& report) {
  zhandle_t* zh = nullptr;
  auto keep = zookeeper_raw_handle(uri, &zh);
  const std::string parent = "/dlock-bench-floor3";
  zoo_create(zh, parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  const std::string prefix = parent + "/x-";
  auto once = [&] {
    char path[256];
    if (zoo_create(zh, prefix.c_str(), "o", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, path, sizeof path) != ZOK) {
      throw std::runtime_error("zookeeper 3-request cycle: create failed");
    }
    String_vector v{};
    if (zoo_get_children(zh, parent.c_str(), 0, &v) != ZOK) throw std::runtime_error("get_children failed");
    deallocate_String_vector(&v);
    if (zoo_delete(zh, path, -1) != ZOK) throw std::runtime_error("delete failed");
  };
  for (int i = 0; i < settings.warmup; ++i) once();
  std::vector<double> lat;
  lat.reserve(static_cast<std::size_t>(settings.iterations));
  for (int i = 0; i < settings.iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    lat.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  Row r;
  r.section = "a";
  r.what = "raw C client create ephemeral-seq + get_children + delete (3 requests, the peers' cycle)";
  r.p50_us = pct(lat, 50);
  r.p99_us = pct(lat, 99);
  r.other = std::to_string(settings.iterations) + " iterations";
  r.metrics = {{"p50_us", *r.p50_us}, {"p99_us", *r.p99_us}};
  report.add(std::move(r));
}

// Runs a shell command line (no secrets in it) and parses its "key value" lines.
std::map<std::string, std::string> run_kv(const std::string& cmd) {
  std::map<std::string, std::string> kv;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return kv;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    const auto sp = s.find(' ');
    if (sp != std::string::npos) kv[s.substr(0, sp)] = s.substr(sp + 1);
  }
  ::pclose(f);
  return kv;
}

// Debian's jars carry no Implementation-Version: read it from the versioned link next to
// the jar (curator-recipes-5.4.0.jar -> curator-recipes.jar).
std::string curator_version() {
  const std::string dir = "/usr/share/java";
  const std::string stem = "curator-recipes-";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(stem, 0) == 0 && f.size() > stem.size() + 4 && f.ends_with(".jar")) {
      return f.substr(stem.size(), f.size() - stem.size() - 4);
    }
  }
  return "?";
}

void peer_row(const std::string& name, std::map<std::string, std::string> kv, Report& report) {
  if (kv.count("error") || !kv.count("p50_us") || !kv.count("p99_us")) {
    report.add_note("peer " + name + ": " + (kv.count("error") ? kv["error"] : "gave no figures"));
    return;
  }
  Row r;
  r.section = "a";
  r.what = "peer: " + name + " " + kv["version"] + " acquire + release";
  r.p50_us = std::stod(kv["p50_us"]);
  r.p99_us = std::stod(kv["p99_us"]);
  r.other = kv["iterations"] + " iterations";
  r.metrics = {{"p50_us", *r.p50_us}, {"p99_us", *r.p99_us}};
  report.add(std::move(r));
}

}  // namespace

void run_zookeeper_peers(const dlock::Uri& uri, const Settings& settings, Report& report) {
  if (uri.password) {
    report.add_note("zk peers: skipped (the URI has credentials, which never go on a command line)");
    return;
  }
  // The peers take ~1 ms a cycle: a few thousand iterations give stable percentiles.
  Settings s = settings;
  s.iterations = std::min(settings.iterations, 3000);
  s.warmup = std::min(settings.warmup, 300);
  cycle3(uri, s, report);
  const std::string hosts = zookeeper_hosts(uri);
  const std::string n = std::to_string(s.iterations), w = std::to_string(s.warmup);
  const std::string dir = DLOCK_BENCH_PEERS_DIR;
  if (::access("/usr/bin/python3", X_OK) == 0) {
    peer_row("kazoo Lock",
             run_kv("/usr/bin/python3 '" + dir + "/kazoo_lock.py' '" + hosts + "' " + n + " " + w + " /" +
                    bench_name("peer-kazoo") + " 2>&1"),
             report);
  } else {
    report.add_note("peer kazoo: /usr/bin/python3 not found");
  }
  const std::string cp =
      "/usr/share/java/curator-client.jar:/usr/share/java/curator-framework.jar:/usr/share/java/curator-recipes.jar:"
      "/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/guava.jar:"
      "/usr/share/java/slf4j-api.jar:/usr/share/java/netty-handler.jar:/usr/share/java/netty-transport.jar:"
      "/usr/share/java/netty-common.jar:/usr/share/java/netty-buffer.jar:/usr/share/java/netty-codec.jar:"
      "/usr/share/java/netty-resolver.jar:/usr/share/java/netty-transport-native-unix-common.jar";
  if (::access("/usr/share/java/curator-recipes.jar", R_OK) == 0 && ::access("/usr/bin/java", X_OK) == 0) {
    auto kv = run_kv("/usr/bin/java -Xms64m -Xmx256m -cp '" + cp + "' '" + dir + "/CuratorLock.java' '" + hosts + "' " +
                    n + " " + w + " /" + bench_name("peer-curator") + " 2>/dev/null");
    kv["version"] = curator_version();
    peer_row("Curator InterProcessMutex", kv, report);
    // Contended: as many workers as (b) has, each with its own session, for (b)'s window.
    const auto secs = std::max<long long>(1, std::chrono::duration_cast<std::chrono::seconds>(settings.contended).count());
    auto ck = run_kv("/usr/bin/java -Xms64m -Xmx256m -cp '" + cp + "' '" + dir + "/CuratorLock.java' contend '" + hosts +
                     "' " + std::to_string(settings.workers) + " " + std::to_string(secs) + " /" +
                     bench_name("peer-curator-contended") + " 2>/dev/null");
    if (ck.count("handoffs_per_s")) {
      Row r;
      r.section = "b";
      r.what = "peer: Curator " + curator_version() + " InterProcessMutex handoffs per second, " +
               std::to_string(settings.workers) + " threads with a session each";
      r.other = ck["handoffs_per_s"] + " handoffs/s; " + ck["acquisitions_per_s"] + " acquisitions/s";
      r.metrics = {{"handoffs_per_s", std::stod(ck["handoffs_per_s"])}};
      report.add(std::move(r));
    } else {
      report.add_note("peer Curator contended: gave no figures");
    }
  } else {
    report.add_note("peer Curator: libcurator-recipes-java or java not installed");
  }
}

}  // namespace dlock_bench
