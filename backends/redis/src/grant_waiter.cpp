#include "grant_waiter.h"

#include <poll.h>

#include <algorithm>
#include <charconv>
#include <cerrno>

#include "dlock/error.h"

namespace dlock::redis {

namespace {
constexpr std::size_t kMaxIdle = 8;  // dedicated connections kept for the next waits

std::optional<std::uint64_t> token_of(const redisReply* r) {
  if (r == nullptr) return std::nullopt;
  if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) return static_cast<std::uint64_t>(r->integer);
  if (r->type != REDIS_REPLY_STRING) return std::nullopt;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(r->str, r->str + r->len, v);
  if (ec != std::errc() || end != r->str + r->len || v == 0) return std::nullopt;
  return v;
}

std::string seconds_text(std::chrono::milliseconds d) {
  const auto ms = std::max<long long>(d.count(), 100);
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + std::to_string(ms % 100 / 10) +
         std::to_string(ms % 10);
}
}  // namespace

GrantWaiter::Wait::Result GrantWaiter::Wait::take() {
  std::lock_guard lock(m);
  Result r = result;
  if (r.state != State::waiting) result = Result{};
  return r;
}

GrantWaiter::GrantWaiter(RedisOptions options, const Scripts& scripts)
    : options_(std::move(options)), scripts_(scripts), blpop_timeout_(seconds_text(options_.fair_heartbeat)) {}

GrantWaiter::~GrantWaiter() {
  if (fork_guard_.in_forked_child()) {
    // The thread was not copied and mu_ may be held forever; the connections are the
    // parent's. Leak them.
    static_cast<void>(thread_.release());
    for (auto& w : waits_) static_cast<void>(w->conn.release());
    for (auto& c : idle_) static_cast<void>(c.release());
    return;
  }
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  event_.signal();
  if (thread_ && thread_->joinable()) thread_->join();
}

void GrantWaiter::send(Wait& w) {
  const std::string_view blpop[] = {"BLPOP", w.grants, blpop_timeout_};
  const std::string_view keys[] = {w.hash, w.readers, w.grants};
  const std::string_view args[] = {w.owner, w.lease};
  w.conn->append(blpop);
  scripts_.append(*w.conn, Script::pickup, keys, args);
  w.replies = 0;
  w.popped.reset();
  w.sent = Clock::now();  // the pick-up runs after this: the lease counts from later
  w.conn->flush();
}

std::shared_ptr<GrantWaiter::Wait> GrantWaiter::start(const std::string& hash, const std::string& readers,
                                                      const std::string& grant_list, std::string_view owner_key,
                                                      std::chrono::milliseconds lease, std::function<void()> wake) {
  auto w = std::make_shared<Wait>();
  w->hash = hash;
  w->readers = readers;
  w->grants = grant_list;
  w->owner = std::string(owner_key);
  w->lease = std::to_string(lease.count());
  w->wake = std::move(wake);
  {
    std::lock_guard lock(mu_);
    while (!idle_.empty() && !w->conn) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      if (!c->broken() && !c->stale()) w->conn = std::move(c);
    }
  }
  if (!w->conn) w->conn = Connection::open(options_);  // throws unavailable
  send(*w);
  {
    std::lock_guard lock(mu_);
    if (!thread_ && event_.valid()) thread_ = std::make_unique<std::thread>([this] { run(); });
    waits_.push_back(w);
  }
  event_.signal();
  return w;
}

void GrantWaiter::stop(const std::shared_ptr<Wait>& w) noexcept {
  std::unique_ptr<Connection> drop;
  {
    std::lock_guard lock(mu_);
    auto it = std::find(waits_.begin(), waits_.end(), w);
    if (it != waits_.end()) {
      waits_.erase(it);
      drop = std::move(w->conn);  // mid-BLPOP: closing it ends the BLPOP on the server
    }
  }
  std::lock_guard lock(w->m);
  w->active = false;
}

void GrantWaiter::finish(Wait& w, Wait::State state, std::uint64_t token) noexcept {
  std::lock_guard lock(w.m);
  if (!w.active) return;
  w.result = {state, token, w.sent};
  try {
    w.wake();
  } catch (...) {
    // A wake-up is a hint; a throwing callback must not kill the thread.
  }
}

bool GrantWaiter::read(Wait& w) noexcept {
  redisContext* ctx = w.conn->raw();
  if (redisBufferRead(ctx) != REDIS_OK) return true;
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) return true;
    if (raw == nullptr) return false;  // more to come
    Reply r = take_reply(raw);
    if (w.replies++ == 0) {
      // BLPOP: [list, token], or nil after its timeout.
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        w.popped = token_of(r->element[1]);
        if (!w.popped) return true;
      } else if (r->type != REDIS_REPLY_NIL) {
        return true;  // an error (NOPERM…): the core's attempts report it
      }
      continue;
    }
    // The pick-up: {1, token or nil} when this owner holds the lock, 0 otherwise.
    if (Scripts::is_noscript(r.get())) {
      try {
        scripts_.load(*w.conn, Script::pickup);  // the server lost its scripts: once more
        send(w);
      } catch (...) {
        return true;
      }
      return false;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
      auto token = w.popped ? w.popped : token_of(r->element[1]);
      if (!token) return true;  // held, but no token to tell: the core's attempt picks it up
      w.popped = token;
      w.replies = -1;  // granted
      return true;
    }
    if (r->type != REDIS_REPLY_INTEGER) return true;
    // Not held. A grant whose pick-up lease ran out is the core's to retry; a BLPOP that
    // only timed out waits again.
    if (w.popped) return true;
    try {
      send(w);
    } catch (...) {
      return true;
    }
    return false;
  }
}

void GrantWaiter::run() noexcept {
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<Wait>> polled;
  for (;;) {
    fds.clear();
    polled.clear();
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
      fds.push_back({event_.fd(), POLLIN, 0});
      for (auto& w : waits_) {
        fds.push_back({w->conn->raw()->fd, POLLIN, 0});
        polled.push_back(w);
      }
    }
    const int n = ::poll(fds.data(), fds.size(), 1000);
    if (n < 0 && errno != EINTR) continue;
    if (fds[0].revents & POLLIN) event_.drain();
    for (std::size_t i = 0; i < polled.size(); ++i) {
      if (!(fds[i + 1].revents & (POLLIN | POLLERR | POLLHUP))) continue;
      auto& w = polled[i];
      std::unique_ptr<Connection> done;
      bool granted = false;
      std::uint64_t token = 0;
      {
        std::lock_guard lock(mu_);
        auto it = std::find(waits_.begin(), waits_.end(), w);
        if (it == waits_.end()) continue;  // stopped meanwhile
        if (!read(*w)) continue;
        granted = w->replies == -1;
        token = w->popped.value_or(0);
        waits_.erase(it);
        done = std::move(w->conn);
        // A connection that answered both requests is clean: keep it for the next wait.
        if (granted && !done->broken() && idle_.size() < kMaxIdle) idle_.push_back(std::move(done));
      }
      finish(*w, granted ? Wait::State::granted : Wait::State::failed, token);
    }
  }
}

}  // namespace dlock::redis
