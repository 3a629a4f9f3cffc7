#include "session_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "dlock/error.h"
#include "sql.h"

namespace dlock::postgres {
namespace {

constexpr int monitor_period_ms = 50;  // bounds how late a session that just went idle is watched
// How long a session that woke the monitor while busy stays out of its poll set at most:
// the delay this adds to noticing its end (pg_terminate_backend) right after a statement,
// against ~100 monitor wake-ups a second instead of one per statement on a busy session.
constexpr int rewatch_after_ms = 10;
constexpr auto rewatch_after = std::chrono::milliseconds(rewatch_after_ms);

}  // namespace

SessionPool::SessionPool(PgOptions options, std::string prepare_sql)
    : options_(std::move(options)), prepare_sql_(std::move(prepare_sql)) {
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(ErrorCode::internal, "postgres backend: cannot create the monitor's pipe");
  }
  monitor_ = std::thread([this] { monitor_loop(); });
}

SessionPool::~SessionPool() {
  stop_.store(true);
  poke();
  if (monitor_.joinable()) monitor_.join();
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sessions_);
    unlocks_.clear();
  }
  for (auto& s : all) {
    std::lock_guard lock(s->mu);
    s->close_locked();
  }
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::shared_ptr<Session> SessionPool::open_session() {
  auto conn = PgConn::open(options_, options_.application_name);
  conn->exec_simple(prepare_sql_, "preparing statements",
                    PgConn::Clock::now() + options_.command_timeout);
  return std::make_shared<Session>(std::move(conn));
}

void SessionPool::add(std::shared_ptr<Session> s) {
  {
    std::lock_guard lock(mu_);
    sessions_.push_back(std::move(s));
  }
  poke();
}

std::shared_ptr<Session> SessionPool::open_counted() {
  std::shared_ptr<Session> s;
  try {
    s = open_session();
  } catch (...) {
    std::lock_guard lock(mu_);
    --opening_;
    throw;
  }
  std::lock_guard lock(mu_);
  --opening_;
  sessions_.push_back(s);
  return s;
}

std::shared_ptr<Session> SessionPool::for_try(std::int64_t key) {
  {
    std::unique_lock lock(mu_);
    std::shared_ptr<Session> least;
    for (auto& s : sessions_) {
      if (s->dead.load() || s->dedicated || s->keys.count(key)) continue;
      if (s->users == 0) {
        s->keys.insert(key);
        ++s->users;
        return s;
      }
      if (!least || s->users < least->users) least = s;
    }
    if (sessions_.size() + opening_ >= options_.pool) {
      if (!least) return nullptr;
      least->keys.insert(key);
      ++least->users;
      return least;
    }
    ++opening_;
  }
  auto s = open_counted();
  {
    std::lock_guard lock(mu_);
    s->keys.insert(key);
    ++s->users;
  }
  poke();
  return s;
}

void SessionPool::unreserve(Session& s, std::int64_t key) {
  std::lock_guard lock(mu_);
  s.keys.erase(key);
}

void SessionPool::done_using(Session& s) {
  std::lock_guard lock(mu_);
  if (s.users > 0) --s.users;
}

std::shared_ptr<Session> SessionPool::for_wait(bool keep_spare) {
  bool spared = false;  // an unused session was left for cancels
  {
    std::lock_guard lock(mu_);
    std::shared_ptr<Session> unused;
    int idle = 0;  // sessions for_cancel() could hand out
    for (auto& s : sessions_) {
      if (s->dead.load() || s->dedicated || s->users != 0) continue;
      ++idle;
      if (!unused && s->keys.empty()) unused = s;
    }
    const bool room = sessions_.size() + opening_ < options_.pool;
    spared = unused && keep_spare && idle == 1 && room;
    if (unused && !spared) {
      unused->dedicated = true;
      return unused;
    }
    if (!room) return nullptr;
    ++opening_;
  }
  std::shared_ptr<Session> s;
  try {
    s = open_counted();
  } catch (const Error&) {
    if (spared) return for_wait(false);
    throw;
  }
  std::lock_guard lock(mu_);
  s->dedicated = true;
  return s;
}

std::shared_ptr<Session> SessionPool::for_cancel() {
  std::lock_guard lock(mu_);
  std::shared_ptr<Session> pick;
  for (auto& s : sessions_) {
    if (s->dead.load() || s->dedicated || s->users != 0 || s->busy.load() != 0) continue;
    if (!pick || (s->keys.empty() && !pick->keys.empty())) pick = s;
  }
  if (pick) ++pick->users;
  return pick;
}

void SessionPool::wait_granted(Session& s, std::int64_t key) {
  std::lock_guard lock(mu_);
  s.dedicated = false;
  s.keys.insert(key);
}

void SessionPool::wait_ended(const std::shared_ptr<Session>& s) {
  std::lock_guard lock(mu_);
  s->dedicated = false;
  if (s->dead.load()) std::erase(sessions_, s);
}

void SessionPool::forget(const std::shared_ptr<Session>& s) {
  std::lock_guard lock(mu_);
  std::erase(sessions_, s);
}

void SessionPool::poke() noexcept {
  const char c = 1;
  [[maybe_unused]] auto n = ::write(wake_pipe_[1], &c, 1);
}

void SessionPool::unlock_later(std::shared_ptr<Session> s, std::int64_t key, bool shared) {
  {
    std::lock_guard lock(mu_);
    if (stop_.load()) return;
    unlocks_.push_back({std::move(s), key, shared});
  }
  poke();
}

std::size_t SessionPool::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void SessionPool::run_unlocks() {
  while (true) {
    Unlock u;
    {
      std::lock_guard lock(mu_);
      if (unlocks_.empty()) return;
      u = std::move(unlocks_.front());
      unlocks_.pop_front();
    }
    bool killed = false;
    {
      SessionUse use(*u.session);
      if (PgConn* c = u.session->conn()) {
        try {
          const auto deadline = PgConn::Clock::now() + options_.command_timeout;
          c->send_prepared(u.shared ? stmt::unlock_s : stmt::unlock_x, u.key, nullptr, "unlock", deadline);
          (void)c->wait_result(deadline, "unlock");
        } catch (const Error&) {
          u.session->close_locked();  // doubt: closing frees the lock on the server
          killed = true;
        }
      }
    }
    unreserve(*u.session, u.key);
    if (killed) forget(u.session);
  }
}

void SessionPool::check(const std::shared_ptr<Session>& s) {
  std::function<void()> wake;
  bool killed = false;
  {
    std::unique_lock lock(s->mu, std::try_to_lock);
    if (!lock.owns_lock()) {
      s->unwatched.store(true);  // a caller is reading its own reply: stop watching for now
      return;
    }
    if (s->conn() == nullptr) return;
    PgConn& c = *s->conn();
    const bool alive = c.poll_input();
    if (s->wait_state == WaitState::in_flight) {
      if (alive && !c.result_ready()) return;
      killed = s->finish_wait_locked(alive);
      wake = s->wake;
    } else if (!alive) {
      s->close_locked();
      killed = true;
      wake = s->wake;
    } else if (c.in_flight() && c.result_ready()) {
      try {
        (void)c.take_result();  // a probe that answered after its deadline
      } catch (const Error&) {
      }
    }
  }
  if (killed) forget(s);
  if (wake) wake();
}

void SessionPool::monitor_loop() {
  std::vector<std::shared_ptr<Session>> watched;
  std::vector<pollfd> fds;
  bool poked = false;
  auto rewatched = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    run_unlocks();
    watched.clear();
    fds.assign(1, pollfd{wake_pipe_[0], POLLIN, 0});
    // A poke (a wait was sent, a session was added) or the period's end watches every
    // session again: nothing stays unwatched longer than rewatch_after.
    const auto now = std::chrono::steady_clock::now();
    const bool rewatch = poked || now - rewatched >= rewatch_after;
    if (rewatch) rewatched = now;
    poked = false;
    bool some_unwatched = false;
    {
      std::lock_guard lock(mu_);
      for (auto& s : sessions_) {
        if (rewatch) s->unwatched.store(false);
        some_unwatched = some_unwatched || s->unwatched.load();
        if (s->busy.load() == 0 && !s->dead.load() && !s->unwatched.load()) {
          watched.push_back(s);
          fds.push_back(pollfd{s->fd, POLLIN | POLLRDHUP, 0});
        }
      }
    }
    const int n = ::poll(fds.data(), fds.size(), some_unwatched ? rewatch_after_ms : monitor_period_ms);
    if (n <= 0) continue;
    if (fds[0].revents != 0) {
      poked = true;
      char buf[64];
      while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) check(watched[i - 1]);
    }
  }
}

}  // namespace dlock::postgres
