// Puts redis:// and redis+unix:// into dlock::open's registry.
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/spi/registrar.h"
#include "dlock/uri.h"
#include "options.h"
#include "redis_backend.h"

namespace dlock::redis {
namespace {

std::shared_ptr<ILockProvider> open_redis(const Uri& uri) {
  auto backend = std::make_shared<RedisBackend>(parse_options(uri));
  return spi::make_provider(std::move(backend), uri.redacted());
}

const bool registered = spi::register_schemes({"redis", "redis+unix"}, open_redis);

}  // namespace
}  // namespace dlock::redis
