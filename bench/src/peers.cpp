#include "peers.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "sections.h"

extern char** environ;

namespace dlock_bench {

namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, which sees python3-redis

// Runs argv with `extra_env` added, returns its stdout. Throws std::runtime_error.
std::string capture(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp, argv;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args_store = args;
  for (auto& a : args_store) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error(std::string("cannot run ") + argv[0] + ": " + std::strerror(rc));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(args[1] + " failed");
  return out;
}

void redis_py(const dlock::Uri& uri, const Settings& settings, Report& report) {
  if (::access(kPython, X_OK) != 0) {
    report.add_note("peer redis-py: " + std::string(kPython) + " not found");
    return;
  }
  const std::string host = uri.hosts.empty() || uri.hosts[0].host.empty() ? "127.0.0.1" : uri.hosts[0].host;
  const std::string port = std::to_string(uri.hosts.empty() || uri.hosts[0].port == 0 ? 6379 : uri.hosts[0].port);
  const std::string db = uri.path.size() > 1 ? uri.path.substr(1) : "0";
  std::vector<std::string> env;
  if (uri.password) env.push_back("DLOCK_BENCH_REDIS_PASSWORD=" + *uri.password);
  if (!uri.user.empty()) env.push_back("DLOCK_BENCH_REDIS_USER=" + uri.user);
  const std::string out = capture({kPython, std::string(DLOCK_BENCH_PEERS_DIR) + "/redis_py_lock.py", host, port, db,
                                   std::to_string(settings.iterations), std::to_string(settings.warmup),
                                   bench_name("peer-redis-py")},
                                  env);
  std::map<std::string, std::string> kv;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    auto sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  if (kv.count("error")) {
    report.add_note("peer redis-py: " + kv["error"]);
    return;
  }
  if (!kv.count("p50_us") || !kv.count("p99_us")) throw std::runtime_error("redis-py peer gave no figures");
  Row r;
  r.section = "a";
  r.what = "peer: redis-py " + kv["version"] + " Lock acquire + release";
  r.p50_us = std::stod(kv["p50_us"]);
  r.p99_us = std::stod(kv["p99_us"]);
  r.other = kv["iterations"] + " iterations";
  r.metrics = {{"p50_us", *r.p50_us}, {"p99_us", *r.p99_us}};
  report.add(std::move(r));
}

}  // namespace

#ifdef DLOCK_BENCH_ZOOKEEPER
void run_zookeeper_peers(const dlock::Uri& uri, const Settings& settings, Report& report);  // peers_zookeeper.cpp
#endif

void run_peers(const dlock::Uri& uri, const Settings& settings, Report& report) {
  if (uri.scheme == "redis") redis_py(uri, settings, report);
#ifdef DLOCK_BENCH_ZOOKEEPER
  if (uri.scheme == "zk" || uri.scheme == "zookeeper") run_zookeeper_peers(uri, settings, report);
#endif
#ifdef DLOCK_BENCH_MYSQL
  if (uri.scheme == "mysql" || uri.scheme == "mariadb") run_mysql_peers(uri, settings, report);
#endif
}

}  // namespace dlock_bench
