#include "connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <hiredis/sds.h>

#include "dlock/error.h"
#include "dlock/support/close_on_exec.h"
#include "errors.h"

namespace dlock::redis {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

// argv arrays for hiredis, without a heap allocation for short commands.
class Argv {
 public:
  explicit Argv(std::span<const std::string_view> args) {
    if (args.size() > kInline) {
      heap_ptrs_.resize(args.size());
      heap_lens_.resize(args.size());
      ptrs_ = heap_ptrs_.data();
      lens_ = heap_lens_.data();
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      ptrs_[i] = args[i].data();
      lens_[i] = args[i].size();
    }
    argc_ = static_cast<int>(args.size());
  }
  int argc() const { return argc_; }
  const char** ptrs() { return ptrs_; }
  const size_t* lens() const { return lens_; }

 private:
  static constexpr std::size_t kInline = 24;
  const char* inline_ptrs_[kInline];
  size_t inline_lens_[kInline];
  const char** ptrs_ = inline_ptrs_;
  size_t* lens_ = inline_lens_;
  std::vector<const char*> heap_ptrs_;
  std::vector<size_t> heap_lens_;
  int argc_ = 0;
};

// The value of `name` in an INFO reply (lines "name:value" after a "# Section" header);
// empty if absent or not a reply.
std::string info_field(const redisReply* r, std::string_view name) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return {};
  const std::string_view text(r->str, r->len);
  const std::string key = "\n" + std::string(name) + ":";
  auto at = text.find(key);
  if (at == std::string_view::npos) return {};
  at += key.size();
  const auto end = text.find_first_of("\r\n", at);
  return std::string(text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
}

}  // namespace

std::unique_ptr<Connection> Connection::open(const RedisOptions& o) {
  const timeval connect_tv = to_timeval(o.connect_timeout);
  redisContext* ctx = o.unix_path.empty()
                          ? redisConnectWithTimeout(o.host.c_str(), o.port, connect_tv)
                          : redisConnectUnixWithTimeout(o.unix_path.c_str(), connect_tv);
  if (ctx == nullptr || ctx->err != 0) {
    Error e = translate_error(o.where, "connect", ctx, nullptr);
    if (ctx != nullptr) redisFree(ctx);
    throw e;
  }
  std::unique_ptr<Connection> c(new Connection(ctx, o.where));
  // hiredis opens its socket without O_CLOEXEC: keep it out of what the user execs.
  support::set_close_on_exec(ctx->fd);
  if (redisSetTimeout(ctx, to_timeval(o.command_timeout)) != REDIS_OK) {
    c->transport_failed("set timeout");
  }
  if (o.unix_path.empty() && redisEnableKeepAlive(ctx) != REDIS_OK) c->transport_failed("keep-alive");
  if (o.password) {
    std::vector<std::string_view> auth{"AUTH"};
    if (!o.user.empty()) auth.push_back(o.user);
    auth.push_back(*o.password);
    Reply r = c->command(auth);
    if (r->type != REDIS_REPLY_STATUS) c->fail("authenticate", r.get());
  }
  if (o.db != 0) {
    const std::string db = std::to_string(o.db);
    const std::string_view select[] = {"SELECT", db};
    Reply r = c->command(select);
    if (r->type != REDIS_REPLY_STATUS) c->fail("select database " + db, r.get());
  }
  {
    // One round trip for both sections (Redis < 7 takes one section per INFO).
    const std::string_view server[] = {"INFO", "server"};
    const std::string_view memory[] = {"INFO", "memory"};
    c->append(server);
    c->append(memory);
    Reply rs = c->read_reply();
    Reply rm = c->read_reply();
    // A server that wants a password refuses INFO with NOAUTH: say so here, before the
    // scripts are loaded (a request over 16 KB from a client that has not authenticated
    // gets only "Protocol error: unauthenticated bulk length").
    if (rs->type == REDIS_REPLY_ERROR && std::string_view(rs->str, rs->len).starts_with("NOAUTH")) {
      c->fail("read server info", rs.get());
    }
    // A user the ACL denies INFO goes without these checks: run_id only sharpens the
    // data-loss guard (README, "Data loss"), and the eviction policy cannot be read.
    c->run_id = info_field(rs.get(), "run_id");
    const std::string policy = info_field(rm.get(), "maxmemory_policy");
    const bool evicts = policy.starts_with("allkeys-") || policy.starts_with("volatile-");
    if (evicts && !o.allow_eviction) {
      throw Error(ErrorCode::invalid_argument,
                  o.where + ": the server may evict keys (maxmemory-policy " + policy +
                      "): a held lock's key would be the first to go, and the lock granted "
                      "twice. Set maxmemory-policy noeviction on the server, or add "
                      "allow_eviction=true to the URI to accept the risk");
    }
  }
  return c;
}

Connection::~Connection() { redisFree(ctx_); }

Reply Connection::command(std::span<const std::string_view> args) {
  append(args);
  return read_reply();
}

void Connection::append(std::span<const std::string_view> args) {
  Argv argv(args);
  if (redisAppendCommandArgv(ctx_, argv.argc(), argv.ptrs(), argv.lens()) != REDIS_OK) {
    transport_failed(args.empty() ? "send" : args[0]);
  }
}

void Connection::flush() {
  // hiredis writes with write(2), which raises SIGPIPE on a connection the server closed and
  // kills a process that did not ignore it; a library must not. So the queued commands are
  // sent here with MSG_NOSIGNAL, leaving hiredis nothing to write.
  while (sdslen(ctx_->obuf) > 0) {
    const ssize_t n = ::send(ctx_->fd, ctx_->obuf, sdslen(ctx_->obuf), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      timed_out_ = errno == EAGAIN || errno == EWOULDBLOCK;
      ctx_->err = REDIS_ERR_IO;
      snprintf(ctx_->errstr, sizeof ctx_->errstr, "%s",
               errno == EAGAIN ? "timed out sending the request" : std::strerror(errno));
      transport_failed("send");
    }
    // Drop the sent bytes (sdsrange without a link-time dependency: hiredis 0.14 declares
    // its sds functions without C linkage for C++; the length helpers are inline).
    const std::size_t left = sdslen(ctx_->obuf) - static_cast<std::size_t>(n);
    std::memmove(ctx_->obuf, ctx_->obuf + n, left);
    sdssetlen(ctx_->obuf, left);
    ctx_->obuf[left] = '\0';
  }
}

Reply Connection::read_reply() {
  flush();
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
    // hiredis 0.14 reports a read timeout as an I/O error with EAGAIN.
    const int e = errno;
    timed_out_ = ctx_->err == REDIS_ERR_IO && (e == EAGAIN || e == EWOULDBLOCK);
    take_reply(raw);  // frees a partial reply
    transport_failed("read reply");
  }
  return Reply(static_cast<redisReply*>(raw));
}

void Connection::fail(std::string_view doing, const redisReply* reply) const {
  throw translate_error(where_, doing, ctx_, reply);
}

void Connection::transport_failed(std::string_view doing) {
  if (ctx_->err == 0) {
    // Mark the context dead so the pool drops it.
    ctx_->err = REDIS_ERR_OTHER;
    snprintf(ctx_->errstr, sizeof ctx_->errstr, "connection failed");
  }
  throw translate_error(where_, doing, ctx_, nullptr);
}

bool Connection::set_timeout(std::chrono::milliseconds timeout) noexcept {
  return redisSetTimeout(ctx_, to_timeval(std::max(timeout, std::chrono::milliseconds(1)))) == REDIS_OK;
}

bool Connection::stale() const noexcept {
  pollfd p{ctx_->fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;  // readable (EOF or unasked data), error, or hang-up
}

}  // namespace dlock::redis
