#include "test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

namespace dlock::zookeeper::test {
namespace {
void quiet(zhandle_t*, int, int, const char*, void*) {}
}  // namespace

std::string hosts() {
  const char* v = std::getenv("DLOCK_TEST_ZOOKEEPER_URI");
  if (v == nullptr || *v == '\0') throw std::runtime_error("DLOCK_TEST_ZOOKEEPER_URI not set");
  std::string s = v;
  if (s.rfind("zk://", 0) == 0) s = s.substr(5);
  return s.substr(0, s.find('/'));
}

std::string fresh_prefix() {
  // The server keeps the nodes of earlier runs (a chroot test's node is persistent), and
  // process ids come round again: the random part keeps a later run's prefix unused.
  static const std::string run = std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}() % 1000000);
  static std::atomic<int> n{0};
  return "zkt-" + run + "-" + std::to_string(n++);
}

std::string uri_for(const std::string& prefix, const std::string& extra) {
  return "zk://" + hosts() + "/?prefix=" + prefix +
         "&session_timeout=1s&connect_timeout=1s&command_timeout=1s" + extra;
}

Handle raw(const std::string& digest) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  Handle zh(zookeeper_init(hosts().c_str(), &quiet, 4000, nullptr, nullptr, 0));
  if (!zh) throw std::runtime_error("zookeeper_init failed");
  if (!digest.empty()) zoo_add_auth(zh.get(), "digest", digest.data(), static_cast<int>(digest.size()), nullptr, nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (zoo_state(zh.get()) != ZOO_CONNECTED_STATE) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("raw handle: no session");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return zh;
}

int granted_timeout_ms(int asked_ms) {
  Handle zh(zookeeper_init(hosts().c_str(), &quiet, asked_ms, nullptr, nullptr, 0));
  if (!zh) throw std::runtime_error("zookeeper_init failed");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (zoo_state(zh.get()) != ZOO_CONNECTED_STATE) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("no session");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return zoo_recv_timeout(zh.get());
}

std::vector<std::string> children(zhandle_t* zh, const std::string& path) {
  String_vector v{};
  std::vector<std::string> out;
  const int rc = zoo_get_children(zh, path.c_str(), 0, &v);
  if (rc == ZNONODE) return out;
  if (rc != ZOK) throw std::runtime_error("listing " + path + ": " + zerror(rc));
  for (int i = 0; i < v.count; ++i) out.emplace_back(v.data[i]);
  deallocate_String_vector(&v);
  return out;
}

std::vector<std::string> lock_nodes(zhandle_t* zh, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& c : children(zh, "/" + prefix)) {
    for (const auto& n : children(zh, "/" + prefix + "/" + c)) out.push_back("/" + prefix + "/" + c + "/" + n);
  }
  return out;
}

std::uint16_t port() {
  const auto h = hosts();
  const auto colon = h.find(':');
  if (colon == std::string::npos) return 2181;
  return static_cast<std::uint16_t>(std::stoi(h.substr(colon + 1)));
}

std::string four_letter(const std::string& word) { return four_letter(word, port()); }

std::string four_letter(const std::string& word, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect for " + word);
  }
  std::string out;
  if (::send(fd, word.data(), word.size(), 0) == static_cast<ssize_t>(word.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

long total_watches() {
  const auto s = four_letter("wchs");
  const auto at = s.find("Total watches:");
  if (at == std::string::npos) throw std::runtime_error("unexpected wchs answer: " + s);
  return std::stol(s.substr(at + 14));
}

long mntr_value(const std::string& key) {
  const auto s = four_letter("mntr");
  const auto at = s.find(key + "\t");
  if (at == std::string::npos) throw std::runtime_error("no " + key + " in mntr: " + s);
  return std::stol(s.substr(at + key.size() + 1));
}

pid_t server_pid() {
  const char* d = std::getenv("DLOCK_SERVERS_DIR");
  const std::string root = d != nullptr && *d != '\0' ? d : "/tmp/dlock-servers";
  const std::string dir = root + "/zookeeper/";
  long pid = 0;
  long recorded_port = 0;
  std::ifstream(dir + "pid") >> pid;
  std::ifstream(dir + "port") >> recorded_port;
  if (pid <= 0 || recorded_port != port()) {
    throw std::runtime_error("no pid of the zookeeper on port " + std::to_string(port()) +
                             " in " + dir);
  }
  return static_cast<pid_t>(pid);
}

Frozen::Frozen(pid_t pid) : pid_(pid) {
  if (::kill(pid_, SIGSTOP) != 0) throw std::runtime_error("SIGSTOP failed");
}

}  // namespace dlock::zookeeper::test
