#include "listener.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <vector>

#include "dlock/error.h"

namespace dlock::postgres {

Listener::Listener(PgOptions options, std::string channel)
    : options_(std::move(options)), channel_(std::move(channel)) {
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(ErrorCode::internal, "postgres backend: cannot create the listener's pipe");
  }
  thread_ = std::thread([this] { loop(); });
}

Listener::~Listener() {
  stop_.store(true);
  const char c = 1;
  [[maybe_unused]] auto n = ::write(pipe_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

std::uint64_t Listener::add(const std::string& payload, std::function<void()> wake) {
  std::lock_guard lock(mu_);
  const auto id = next_id_++;
  waiters_.emplace(id, std::make_pair(payload, std::move(wake)));
  return id;
}

void Listener::remove(std::uint64_t id) {
  std::lock_guard lock(mu_);
  waiters_.erase(id);
}

void Listener::wake_matching(const std::string* payload) {
  std::vector<std::function<void()>> wakes;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, entry] : waiters_) {
      if (payload == nullptr || entry.first == *payload) wakes.push_back(entry.second);
    }
  }
  for (auto& w : wakes) w();
}

void Listener::sleep_ms(int ms) {
  pollfd p{pipe_[0], POLLIN, 0};
  (void)::poll(&p, 1, ms);
}

void Listener::loop() {
  std::unique_ptr<PgConn> conn;
  while (!stop_.load()) {
    if (!conn) {
      try {
        auto c = PgConn::open(options_, options_.application_name);
        c->exec_simple("LISTEN \"" + channel_ + "\"", "LISTEN",
                       PgConn::Clock::now() + options_.command_timeout);
        conn = std::move(c);
        healthy_.store(true);
        wake_matching(nullptr);  // releases while we were down were missed
      } catch (const Error&) {
        sleep_ms(500);
        continue;
      }
    }
    pollfd fds[2] = {{pipe_[0], POLLIN, 0}, {conn->socket(), POLLIN, 0}};
    if (::poll(fds, 2, 1000) <= 0) continue;
    if (fds[0].revents != 0) {
      char buf[16];
      while (::read(pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (fds[1].revents == 0) continue;
    if (!conn->poll_input()) {
      conn.reset();
      healthy_.store(false);
      wake_matching(nullptr);  // they poll now
      continue;
    }
    while (PGnotify* n = PQnotifies(conn->raw())) {
      const std::string payload = n->extra ? n->extra : "";
      PQfreemem(n);
      wake_matching(&payload);
    }
  }
}

}  // namespace dlock::postgres
