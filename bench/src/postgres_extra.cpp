// postgres:// extras for dlock-bench: the native blocking hand-off floor (4 processes
// looping pg_advisory_lock + pg_advisory_unlock on one key, by hand with libpq) next to
// dlock's (b) figure of the same run, and the peers tooz and psycopg2.
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pg_wire.h"
#include "postgres_extra.h"
#include "sections.h"

namespace dlock_bench {
namespace {

using std::chrono::steady_clock;

struct Shared {
  std::atomic<int> ready{0};
  std::atomic<int> failed{0};
  std::atomic<int> last{-1};
  std::atomic<long> handoffs{0};
  std::atomic<long> acquisitions{0};
};

[[noreturn]] void worker(const dlock::Uri& uri, Shared* sh, int me, int workers, std::chrono::milliseconds window) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  try {
    auto c = pg_connect(uri);
    pg_prepare(c.get(), "lock", "SELECT pg_advisory_lock($1::bigint)");
    pg_prepare(c.get(), "unlock", "SELECT pg_advisory_unlock($1::bigint)");
    const std::string key = std::to_string(0x6861'6e64LL + getppid());
    ++sh->ready;
    while (sh->ready.load() < workers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto end = steady_clock::now() + window;
    while (steady_clock::now() < end) {
      pg_exec_prepared(c.get(), "lock", key);
      if (sh->last.exchange(me) != me) ++sh->handoffs;
      ++sh->acquisitions;
      pg_exec_prepared(c.get(), "unlock", key);
    }
    std::_Exit(0);
  } catch (...) {
    ++sh->failed;
    ++sh->ready;
    std::_Exit(1);
  }
}

// handoffs/s of the native floor.
double native_handoffs(const dlock::Uri& uri, int workers, std::chrono::milliseconds window) {
  void* mem = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* sh = new (mem) Shared();
  std::vector<pid_t> pids;
  for (int i = 0; i < workers; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) worker(uri, sh, i, workers, window);
    if (pid > 0) pids.push_back(pid);
  }
  for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  const long handoffs = sh->handoffs.load();
  const int failed = sh->failed.load();
  ::munmap(mem, sizeof(Shared));
  if (failed) throw std::runtime_error("native hand-off floor: a worker failed");
  return static_cast<double>(handoffs) / (static_cast<double>(window.count()) / 1000.0);
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void python_peer(const dlock::Uri& uri, const std::string& kind, const Settings& s, Report& report) {
  const std::string host = uri.hosts.empty() ? "127.0.0.1" : uri.hosts[0].host;
  const std::string port = std::to_string(uri.hosts.empty() || !uri.hosts[0].port ? 5432 : uri.hosts[0].port);
  const std::string db = uri.path.size() > 1 ? uri.path.substr(1) : "postgres";
  if (uri.password) ::setenv("DLOCK_BENCH_PG_PASSWORD", uri.password->c_str(), 1);
  const std::string cmd = "/usr/bin/python3 " + quoted(std::string(DLOCK_BENCH_PEERS_DIR) + "/pg_advisory_peers.py") +
                          " " + kind + " " + quoted(host) + " " + port + " " + quoted(db) + " " + quoted(uri.user) +
                          " " + std::to_string(s.iterations) + " " + std::to_string(s.warmup) + " " +
                          quoted(bench_name("peer-" + kind));
  FILE* f = ::popen(cmd.c_str(), "r");
  ::unsetenv("DLOCK_BENCH_PG_PASSWORD");
  if (!f) throw std::runtime_error("cannot run python3");
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  ::pclose(f);
  std::map<std::string, std::string> kv;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    auto sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  if (kv.count("error") || !kv.count("p50_us")) {
    report.add_note("peer " + kind + ": " + (kv.count("error") ? kv["error"] : "no figures"));
    return;
  }
  Row r;
  r.section = "a";
  r.what = "peer: " + kind + " " + kv["version"] + " advisory acquire + release";
  r.p50_us = std::stod(kv["p50_us"]);
  r.p99_us = std::stod(kv["p99_us"]);
  r.other = kv["iterations"] + " iterations";
  r.metrics = {{"p50_us", *r.p50_us}, {"p99_us", *r.p99_us}};
  report.add(std::move(r));
}

}  // namespace

void run_postgres_extra(const dlock::Uri& uri, const Settings& s, Report& report) {
  const auto window = s.contended;
  const double native = native_handoffs(uri, s.workers, window);
  add_native_handoff_rows(
      report, "floor: native pg_advisory_lock hand-off, " + std::to_string(s.workers) + " processes", native, 0.6);
  if (s.peers) {
    python_peer(uri, "psycopg2", s, report);
    python_peer(uri, "tooz", s, report);
    add_speedup_row(report, "peer: tooz", "tooz", 5);
  }
}

}  // namespace dlock_bench
