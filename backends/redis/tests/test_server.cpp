#include "test_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "dlock/uri.h"

namespace dlock::redis::test {

const char* const kNoServerMessage =
    "DLOCK_TEST_REDIS_URI is not set: the redis integration tests need a server. Run "
    "scripts/servers.sh start redis && eval \"$(scripts/servers.sh env)\" (or export "
    "DLOCK_TEST_REDIS_URI=redis://127.0.0.1:16379)";

std::string shared_uri() {
  const char* v = std::getenv("DLOCK_TEST_REDIS_URI");
  return v ? std::string(v) : std::string();
}

std::string unique_prefix() {
  std::random_device rd;
  return "dlock-test:" + std::to_string(::getpid()) + ":" + std::to_string(rd()) + ":";
}

std::string with_params(const std::string& uri, const std::string& params) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + params;
}

Raw::Raw(const std::string& uri) : options_(parse_options(Uri::parse(uri))) {
  c_ = Connection::open(options_);
}

Reply Raw::cmd(std::initializer_list<std::string_view> args) {
  if (c_->broken()) c_ = Connection::open(options_);
  return c_->command(std::span<const std::string_view>(args.begin(), args.size()));
}

long long Raw::integer(std::initializer_list<std::string_view> args) {
  Reply r = cmd(args);
  if (r->type != REDIS_REPLY_INTEGER) c_->fail("raw command", r.get());
  return r->integer;
}

std::optional<std::string> Raw::string(std::initializer_list<std::string_view> args) {
  Reply r = cmd(args);
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) c_->fail("raw command", r.get());
  return std::string(r->str, r->len);
}

bool Raw::holds(const std::string& hold, std::string_view owner) {
  if (string({"GET", hold}) == owner) return true;
  return string({"ZSCORE", hold + ":r", owner}).has_value();
}

void mark_dataset(Raw& raw, const std::string& prefix) { raw.cmd({"SET", prefix + "epoch", "0"}); }

spi::AttemptRequest Req::get() const {
  spi::AttemptRequest r;
  r.name = name;
  r.mode = mode;
  r.owner_key = owner;
  r.lease = lease;
  r.fair = fair;
  r.waiter_id = waiter.empty() ? owner : waiter;
  r.will_wait = will_wait;
  return r;
}

Acquire::Acquire(spi::Backend& backend, Req req, std::function<void()> wake)
    : req_(std::move(req)), view_(req_.get()), acq_(backend.begin_acquire(view_, std::move(wake))) {}

HeldPtr Acquire::try_get() {
  auto a = attempt();
  auto* held = std::get_if<HeldPtr>(&a);
  return held ? *held : nullptr;
}

bool Acquire::woken(std::chrono::milliseconds within) const {
  pollfd p{acq_->wait_fd(), POLLIN, 0};
  if (p.fd < 0) return false;
  return ::poll(&p, 1, static_cast<int>(within.count())) == 1;
}

PrivateServer::PrivateServer(std::vector<std::string> extra_args) : extra_args_(std::move(extra_args)) {
  char tmpl[] = "/tmp/dlock-redis-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return;
  dir_ = tmpl;
  socket_ = dir_ + "/redis.sock";
  start();
}

bool PrivateServer::restart() {
  stop();
  start();
  return running();
}

void PrivateServer::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

void PrivateServer::start() {
  const std::string log = dir_ + "/redis.log";
  std::vector<std::string> argv = {"redis-server", "--port", "0", "--unixsocket", socket_,
                                   "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                   "--dir", dir_, "--logfile", log};
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp("redis-server", args.data());
    ::_exit(127);
  }
  // Ready when it answers PING (bounded: a few seconds).
  for (int i = 0; i < 300 && pid_ > 0; ++i) {
    try {
      Raw raw(uri());
      if (raw.string({"PING"}) == "PONG") return;
    } catch (const Error&) {
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) pid_ = -1;  // it died
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

PrivateServer::~PrivateServer() {
  stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace dlock::redis::test
