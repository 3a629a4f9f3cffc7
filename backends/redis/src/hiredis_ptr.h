// Owning pointers for hiredis objects: the one definition the redis backend, its tests, the
// conformance context and the bench share. Header-only (needs only hiredis's headers), so
// code outside the backend may include it without linking the backend.
#pragma once

#include <memory>

#include <hiredis/hiredis.h>

namespace dlock::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
// An owned reply.
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
// An owned connection.
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

// Takes ownership of what redisCommand(), redisCommandArgv(), redisGetReply() and
// redisGetReplyFromReader() hand back as void* (null stays null).
inline Reply take_reply(void* raw) noexcept { return Reply(static_cast<redisReply*>(raw)); }

}  // namespace dlock::redis
