#include "errors.h"

#include <string>

namespace dlock::redis {
namespace {

bool starts_with(std::string_view text, std::string_view word) {
  return text.substr(0, word.size()) == word;
}

Error from_reply(const std::string& head, std::string_view text) {
  const std::string detail = " (server said: " + std::string(text) + ")";
  if (starts_with(text, "NOAUTH")) {
    return Error(ErrorCode::invalid_argument,
                 head + "authentication required: give user:password@ in the URI" + detail);
  }
  if (starts_with(text, "WRONGPASS") || starts_with(text, "ERR invalid password") ||
      starts_with(text, "ERR invalid username-password") ||
      starts_with(text, "ERR AUTH") || starts_with(text, "ERR Client sent AUTH")) {
    return Error(ErrorCode::invalid_argument,
                 head + "authentication failed: wrong user or password" + detail);
  }
  if (starts_with(text, "ERR DB index") || starts_with(text, "ERR invalid DB index")) {
    return Error(ErrorCode::invalid_argument,
                 head + "the database in the URI does not exist on the server" + detail);
  }
  if (starts_with(text, "NOPERM")) {
    return Error(ErrorCode::invalid_argument,
                 head + "the Redis user lacks a permission this backend needs" + detail);
  }
  if (starts_with(text, "READONLY")) {
    return Error(ErrorCode::unavailable,
                 head + "the server is a read-only replica (after a failover?)" + detail);
  }
  if (starts_with(text, "OOM")) {
    return Error(ErrorCode::unavailable, head + "the server is out of memory (maxmemory)" + detail);
  }
  if (starts_with(text, "LOADING") || starts_with(text, "BUSY") || starts_with(text, "MASTERDOWN") ||
      starts_with(text, "TRYAGAIN") || starts_with(text, "CLUSTERDOWN")) {
    return Error(ErrorCode::unavailable, head + "the server cannot serve now" + detail);
  }
  if (starts_with(text, "MOVED") || starts_with(text, "ASK")) {
    return Error(ErrorCode::unsupported,
                 head + "Redis Cluster redirections are not supported: use a standalone server" + detail);
  }
  return Error(ErrorCode::internal, head + "unexpected error reply" + detail);
}

}  // namespace

Error translate_error(std::string_view where, std::string_view doing, const redisContext* ctx,
                      const redisReply* reply) {
  const std::string head = std::string(where) + ": " + std::string(doing) + ": ";
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
    return from_reply(head, std::string_view(reply->str, reply->len));
  }
  if (ctx == nullptr) return Error(ErrorCode::unavailable, head + "out of memory for a connection");
  if (ctx->err != 0) {
    std::string what = ctx->errstr;
    // hiredis 0.14 reports a read timeout as EAGAIN.
    if (what == "Resource temporarily unavailable") what = "timed out waiting for the reply";
    if (what.empty()) what = "connection failed";
    return Error(ErrorCode::unavailable, head + what);
  }
  const int type = reply ? reply->type : -1;
  return Error(ErrorCode::internal, head + "unexpected reply of type " + std::to_string(type));
}

bool is_error(const redisReply* reply, std::string_view word) noexcept {
  return reply != nullptr && reply->type == REDIS_REPLY_ERROR &&
         std::string_view(reply->str, reply->len).substr(0, word.size()) == word;
}

}  // namespace dlock::redis
