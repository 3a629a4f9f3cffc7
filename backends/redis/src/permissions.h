// The ACL check made when a provider opens (lua/permissions.lua).
#pragma once

#include "connection.h"
#include "options.h"
#include "scripts.h"

namespace dlock::redis {

// Asks the server whether the connected user may run every command the backend sends, on
// the keys and channel of a lock under options.prefix. Throws Error(invalid_argument)
// naming each denied command with its key or channel; does nothing on Redis < 7 (no
// redis.acl_check_cmd). Throws like Scripts::run otherwise.
void check_permissions(Connection& c, const Scripts& scripts, const RedisOptions& options);

}  // namespace dlock::redis
