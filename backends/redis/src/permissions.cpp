#include "permissions.h"

#include <string>
#include <vector>

#include "dlock/error.h"
#include "keys.h"

namespace dlock::redis {

void check_permissions(Connection& c, const Scripts& scripts, const RedisOptions& options) {
  // Any lock's keys stand for all: ACL patterns match the prefix, not the name.
  const LockKeys k(options.prefix, "dlock-acl-check");
  const std::string latch = k.latch("check");
  const std::string marker = dataset_marker(options.prefix);
  const std::string_view args[] = {k.hold,      k.readers, k.counter, k.queue,
                                   k.deadlines, latch,     marker,    scripts.sha(Script::acquire)};
  Reply r = scripts.run(c, Script::permissions, {}, args);
  if (r->type != REDIS_REPLY_ARRAY) c.fail("permission check", r.get());
  if (r->elements == 0) return;
  constexpr std::size_t kShown = 12;
  std::string denied;
  for (std::size_t i = 0; i < r->elements && i < kShown; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS) continue;
    if (!denied.empty()) denied += ", ";
    denied.append(e->str, e->len);
  }
  if (r->elements > kShown) denied += " and " + std::to_string(r->elements - kShown) + " more";
  throw Error(ErrorCode::invalid_argument,
              options.where + ": the Redis user may not run what this backend needs: " + denied +
                  ". Grant it the key pattern ~" + options.prefix + "* and the commands listed in backends/redis/README.md (\"ACL\")");
}

}  // namespace dlock::redis
