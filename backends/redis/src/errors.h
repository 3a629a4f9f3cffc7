// The one place that turns hiredis failures (transport errors and error replies) into
// dlock::Error with a clear message. Messages name the server ("redis host:port"), never
// a password.
#pragma once

#include <string_view>

#include <hiredis/hiredis.h>

#include "dlock/error.h"

namespace dlock::redis {

// Translates the failure of `doing` against `where`:
//   reply is an error reply  → by its first word: NOAUTH/WRONGPASS/invalid password and a
//                               bad DB index or NOPERM → invalid_argument (fix the URI or
//                               the ACL); READONLY, OOM, LOADING, BUSY, MASTERDOWN, TRYAGAIN
//                               → unavailable; MOVED/ASK → unsupported (no Cluster client);
//                               anything else (NOSCRIPT included) → internal;
//   otherwise ctx->err        → unavailable (connection refused, reset, EOF, timeout);
//   reply of an unexpected type → internal.
// REQUIRES: ctx may be null only when the connection could not even be allocated.
Error translate_error(std::string_view where, std::string_view doing, const redisContext* ctx,
                      const redisReply* reply);

// True when `reply` is the error reply that starts with `word` (e.g. "NOSCRIPT").
bool is_error(const redisReply* reply, std::string_view word) noexcept;

}  // namespace dlock::redis
