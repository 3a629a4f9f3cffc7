#include "subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace dlock::redis {

using Clock = std::chrono::steady_clock;

namespace {
// An idle channel stays subscribed this long, so a busy lock does not pay a SUBSCRIBE
// round trip on every wait.
constexpr auto kLinger = std::chrono::seconds(5);
constexpr auto kTick = std::chrono::milliseconds(250);
}  // namespace

struct Subscriber::Channel {
  explicit Channel(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::vector<std::shared_ptr<Entry>> waiters;  // registration order; guarded by mu_
  std::atomic<bool> confirmed{false};           // the server confirmed SUBSCRIBE
  Clock::time_point confirmed_at{};             // guarded by mu_; when, for this connection
  bool sub_pending = false;                     // guarded by mu_
  bool unsub_pending = false;
  bool wake_on_confirm = false;  // resubscribed after a disconnect: messages may have been lost
  Clock::time_point idle_since{};
};

struct Subscriber::Entry {
  Entry(std::string id, std::function<void()> w, std::shared_ptr<Channel> c)
      : waiter_id(std::move(id)), wake(std::move(w)), channel(std::move(c)) {}
  const std::string waiter_id;
  const std::function<void()> wake;
  const std::shared_ptr<Channel> channel;
  std::mutex m;          // held while calling wake, so unregistering waits for a call in flight
  bool active = true;    // guarded by m
};

Subscriber::Registration::Registration(std::shared_ptr<Subscriber> sub, std::shared_ptr<Entry> e,
                                       Polls polls)
    : sub_(std::move(sub)), entry_(std::move(e)), polls_(polls) {}

Subscriber::Registration::~Registration() { sub_->remove(entry_); }

std::chrono::milliseconds Subscriber::Registration::fallback_poll() const noexcept {
  const bool live = sub_->state_.load() == State::up && entry_->channel->confirmed.load();
  return live ? polls_.healthy : polls_.down;
}

Subscriber::Subscriber(RedisOptions options) : options_(std::move(options)), owner_pid_(::getpid()) {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Subscriber::~Subscriber() {
  if (::getpid() != owner_pid_) {
    // A forked child: the thread was not copied and the mutex may be held forever. Leak.
    static_cast<void>(thread_.release());
    static_cast<void>(conn_.release());
    return;
  }
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  signal();
  if (thread_ && thread_->joinable()) thread_->join();
  if (event_fd_ >= 0) ::close(event_fd_);
}

void Subscriber::signal() noexcept {
  if (event_fd_ < 0) return;
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
}

void Subscriber::wake(const std::shared_ptr<Entry>& e) noexcept {
  std::lock_guard lock(e->m);
  if (!e->active) return;
  try {
    e->wake();
  } catch (...) {
    // A wake-up is a hint; a throwing callback must not kill the subscriber.
  }
}

std::unique_ptr<Subscriber::Registration> Subscriber::add(const std::string& channel,
                                                          std::string_view waiter_id, Polls polls,
                                                          std::function<void()> wake_fn) {
  std::unique_lock lock(mu_);
  if (!started_ && event_fd_ >= 0) {
    started_ = true;
    thread_ = std::make_unique<std::thread>([this] { run(); });
  }
  auto& ch = channels_[channel];
  if (!ch) ch = std::make_shared<Channel>(channel);
  auto entry = std::make_shared<Entry>(std::string(waiter_id), std::move(wake_fn), ch);
  ch->waiters.push_back(entry);
  by_waiter_[entry->waiter_id] = entry;
  entries_.fetch_add(1);
  if (!ch->confirmed.load()) {
    dirty_.push_back(ch);
    signal();
    const auto deadline = Clock::now() + options_.command_timeout;
    changed_.wait_until(lock, deadline, [&] {
      return ch->confirmed.load() || state_.load() == State::down || stop_;
    });
  }
  return std::make_unique<Registration>(shared_from_this(), std::move(entry), polls);
}

bool Subscriber::subscribed(const std::string& channel) {
  std::lock_guard lock(mu_);
  auto it = channels_.find(channel);
  return it != channels_.end() && state_.load() == State::up && it->second->confirmed.load() &&
         !it->second->unsub_pending;
}

void Subscriber::remove(const std::shared_ptr<Entry>& entry) noexcept {
  {
    std::lock_guard lock(mu_);
    auto& ws = entry->channel->waiters;
    ws.erase(std::remove(ws.begin(), ws.end(), entry), ws.end());
    auto it = by_waiter_.find(entry->waiter_id);
    if (it != by_waiter_.end() && it->second == entry) by_waiter_.erase(it);
    entries_.fetch_sub(1);
    if (ws.empty()) entry->channel->idle_since = Clock::now();
  }
  std::lock_guard lock(entry->m);
  entry->active = false;
}

void Subscriber::run() noexcept {
  auto backoff = std::chrono::milliseconds(0);
  Clock::time_point connected_at{};
  auto next_tick = Clock::now() + kTick;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    if (!conn_) {
      if (connected_at != Clock::time_point{}) {
        // Reconnect at once after a long-lived connection; back off after a short one
        // (a server that keeps dropping us, or refuses SUBSCRIBE).
        if (Clock::now() - connected_at > std::chrono::seconds(2)) {
          backoff = std::chrono::milliseconds(0);
        }
        connected_at = {};
      }
      if (backoff.count() > 0) {
        pollfd p{event_fd_, POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(backoff.count()));
        std::uint64_t drained;
        [[maybe_unused]] auto n = ::read(event_fd_, &drained, sizeof drained);
        std::lock_guard lock(mu_);
        if (stop_) break;
      }
      backoff = std::clamp(backoff * 2, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
      if (!connect_and_resubscribe()) continue;
      connected_at = Clock::now();
    }
    if (Clock::now() >= next_tick) {
      // Idle channels past their linger are unsubscribed.
      std::lock_guard lock(mu_);
      const auto now = Clock::now();
      for (auto& [name, ch] : channels_) {
        if (ch->waiters.empty() && ch->confirmed.load() && !ch->unsub_pending &&
            now - ch->idle_since > kLinger) {
          dirty_.push_back(ch);
        }
      }
      next_tick = now + kTick;
    }
    if (!send_pending()) {
      disconnect();
      continue;
    }
    pollfd fds[2] = {{event_fd_, POLLIN, 0}, {conn_->raw()->fd, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(kTick.count()));
    if (n < 0 && errno != EINTR) {
      disconnect();
      continue;
    }
    if (fds[0].revents & POLLIN) {
      std::uint64_t drained;
      [[maybe_unused]] auto r = ::read(event_fd_, &drained, sizeof drained);
    }
    if (fds[1].revents & (POLLIN | POLLERR | POLLHUP)) {
      if (!read_replies()) disconnect();
    }
  }
  conn_.reset();
}

bool Subscriber::connect_and_resubscribe() noexcept {
  try {
    conn_ = Connection::open(options_);
  } catch (...) {
    conn_.reset();
    state_.store(State::down);
    std::lock_guard lock(mu_);
    changed_.notify_all();
    return false;
  }
  std::lock_guard lock(mu_);
  for (auto it = channels_.begin(); it != channels_.end();) {
    auto& ch = it->second;
    ch->sub_pending = ch->unsub_pending = false;
    ch->confirmed.store(false);
    if (ch->waiters.empty()) {
      it = channels_.erase(it);
      continue;
    }
    // After a reconnect, releases published while we were away may have been missed.
    ch->wake_on_confirm = had_connection_;
    dirty_.push_back(ch);
    ++it;
  }
  had_connection_ = true;
  state_.store(State::up);
  changed_.notify_all();
  return true;
}

void Subscriber::disconnect() noexcept {
  conn_.reset();
  state_.store(State::down);
  std::vector<std::shared_ptr<Entry>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, ch] : channels_) {
      ch->confirmed.store(false);
      for (auto& w : ch->waiters) all.push_back(w);
    }
    changed_.notify_all();
  }
  // Releases may go unannounced while we are down: every waiter retries, then polls.
  for (auto& w : all) wake(w);
}

bool Subscriber::send_pending() noexcept {
  std::vector<std::shared_ptr<Channel>> work;
  {
    std::lock_guard lock(mu_);
    work.swap(dirty_);
    std::vector<std::string_view> args;
    for (auto& ch : work) {
      if (!ch->waiters.empty() && !ch->confirmed.load() && !ch->sub_pending) {
        ch->sub_pending = true;
        const std::string_view cmd[] = {"SUBSCRIBE", ch->name};
        try {
          conn_->append(cmd);
        } catch (...) {
          return false;
        }
      } else if (ch->waiters.empty() && ch->confirmed.load() && !ch->unsub_pending) {
        ch->unsub_pending = true;
        ch->confirmed.store(false);
        const std::string_view cmd[] = {"UNSUBSCRIBE", ch->name};
        try {
          conn_->append(cmd);
        } catch (...) {
          return false;
        }
      }
    }
  }
  try {
    conn_->flush();
  } catch (...) {
    return false;
  }
  return true;
}

bool Subscriber::read_replies() noexcept {
  if (redisBufferRead(conn_->raw()) != REDIS_OK) return false;
  std::vector<std::shared_ptr<Entry>> to_wake;
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(conn_->raw(), &raw) != REDIS_OK) return false;
    if (raw == nullptr) break;
    Reply r = take_reply(raw);
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return false;  // error reply: reconnect
    try {
      on_reply(r.get(), to_wake);
    } catch (...) {
      return false;
    }
  }
  for (auto& w : to_wake) wake(w);
  return true;
}

void Subscriber::on_reply(const redisReply* r, std::vector<std::shared_ptr<Entry>>& to_wake) {
  const std::string_view kind(r->element[0]->str, r->element[0]->len);
  const std::string name(r->element[1]->str, r->element[1]->len);
  std::lock_guard lock(mu_);
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  auto& ch = it->second;
  if (kind == "subscribe") {
    ch->sub_pending = false;
    if (!ch->unsub_pending) {
      ch->confirmed.store(true);
      ch->confirmed_at = Clock::now();
    }
    if (ch->wake_on_confirm) {
      ch->wake_on_confirm = false;
      to_wake.insert(to_wake.end(), ch->waiters.begin(), ch->waiters.end());
    }
    if (ch->waiters.empty()) ch->idle_since = Clock::now();
    changed_.notify_all();
  } else if (kind == "unsubscribe") {
    ch->unsub_pending = false;
    if (ch->waiters.empty() && !ch->sub_pending) {
      channels_.erase(it);
    } else if (!ch->sub_pending) {
      dirty_.push_back(ch);  // someone registered meanwhile: subscribe again
    } else {
      // The SUBSCRIBE sent after our UNSUBSCRIBE will confirm it.
    }
  } else if (kind == "message") {
    // "g<token>:<waiter id>": the queue handed the lock to that waiter, which picks it up
    // with its next attempt (a round trip that gives it its full lease from then).
    const std::string_view payload(r->element[2]->str, r->element[2]->len);
    const auto colon = payload.find(':');
    if (payload.size() < 3 || payload[0] != 'g' || colon == std::string_view::npos) return;
    auto w = by_waiter_.find(std::string(payload.substr(colon + 1)));
    if (w == by_waiter_.end() || w->second->channel != ch) return;  // not ours: another process's
    to_wake.push_back(w->second);
  }
}

}  // namespace dlock::redis
