#include "grant_wait.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace dlock::redis {

namespace {

std::optional<std::uint64_t> token_of(const redisReply* r) {
  if (r == nullptr) return std::nullopt;
  if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) return static_cast<std::uint64_t>(r->integer);
  if (r->type != REDIS_REPLY_STRING) return std::nullopt;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(r->str, r->str + r->len, v);
  if (ec != std::errc() || end != r->str + r->len || v == 0) return std::nullopt;
  return v;
}

// Seconds with three decimals, as BLPOP takes its timeout (at least 0.1 s).
std::string seconds_text(std::chrono::milliseconds d) {
  const auto ms = std::max<long long>(d.count(), 100);
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + std::to_string(ms % 100 / 10) +
         std::to_string(ms % 10);
}

}  // namespace

GrantWait::GrantWait(std::unique_ptr<Connection> conn, const Scripts& scripts, std::string hold,
                     std::string grants, std::string_view owner,
                     std::chrono::milliseconds lease, std::chrono::milliseconds heartbeat,
                     const std::function<void(Connection&)>& before)
    : conn_(std::move(conn)),
      scripts_(scripts),
      hold_(std::move(hold)),
      grants_(std::move(grants)),
      owner_(owner),
      lease_(std::to_string(lease.count())),
      blpop_timeout_(seconds_text(heartbeat)) {
  if (before) before(*conn_);
  send();
}

int GrantWait::fd() const noexcept { return conn_ ? conn_->raw()->fd : -1; }

void GrantWait::send() {
  const std::string_view blpop[] = {"BLPOP", grants_, blpop_timeout_};
  const std::string_view keys[] = {hold_};
  const std::string_view args[] = {owner_, lease_};
  conn_->append(blpop);
  scripts_.append(*conn_, Script::pickup, keys, args);
  replies_ = 0;
  popped_.reset();
  sent_ = Clock::now();  // the pick-up runs after this: the lease counts from later
  conn_->flush();
}

GrantWait::Result GrantWait::poll() noexcept {
  if (!conn_ || granted_) return {State::failed, 0, sent_};
  // One non-blocking read, not a poll and then a read: this runs on the hand-off path, right
  // after the wait loop saw the descriptor readable. (hiredis' own read blocks.)
  char buf[4096];
  const ssize_t n = ::recv(fd(), buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return {};  // nothing yet
  if (n <= 0 || redisReaderFeed(conn_->raw()->reader, buf, static_cast<std::size_t>(n)) != REDIS_OK) {
    return {State::failed, 0, sent_};  // closed by the server, or a broken connection
  }
  const State s = read_replies();
  if (s == State::granted) granted_ = true;
  return {s, s == State::granted ? popped_.value_or(0) : 0, sent_};
}

std::unique_ptr<Connection> GrantWait::take_idle_connection() noexcept {
  if (!granted_ || !conn_ || conn_->broken()) return nullptr;
  return std::move(conn_);
}

GrantWait::State GrantWait::read_replies() noexcept {
  redisContext* ctx = conn_->raw();
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) return State::failed;
    if (raw == nullptr) return State::waiting;  // more to come
    Reply r = take_reply(raw);
    answered_ = true;
    if (replies_++ == 0) {
      // BLPOP: [list, token], or nil after its timeout.
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        popped_ = token_of(r->element[1]);
        if (!popped_) return State::failed;
      } else if (r->type != REDIS_REPLY_NIL) {
        return State::failed;  // an error (NOPERM…): the core's attempts report it
      }
      continue;
    }
    // The pick-up: 1 when this owner holds the lock, 0 otherwise.
    try {
      if (Scripts::is_noscript(r.get())) {
        scripts_.load(*conn_, Script::pickup);  // the server lost its scripts: once more
        send();
        return State::waiting;
      }
      if (r->type != REDIS_REPLY_INTEGER) return State::failed;
      if (r->integer == 1) {
        // Held. Without the BLPOP's token (it timed out before the grant came) there is no
        // token to tell: the core's next attempt picks the grant up.
        return popped_ ? State::granted : State::failed;
      }
      // Not held. A grant whose pick-up lease ran out is the core's to retry; a BLPOP that
      // only timed out waits again.
      if (popped_) return State::failed;
      send();
      return State::waiting;
    } catch (...) {
      return State::failed;  // the connection broke while sending again
    }
  }
}

}  // namespace dlock::redis
