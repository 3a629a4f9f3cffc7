// Puts postgres:// and postgresql:// into dlock::open's registry.
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/spi/registrar.h"
#include "dlock/uri.h"
#include "options.h"
#include "lease_backend.h"
#include "pg_backend.h"

namespace dlock::postgres {
namespace {

std::shared_ptr<ILockProvider> open_postgres(const Uri& uri) {
  PgOptions options = parse_options(uri);
  if (options.mode == Mode::lease) {
    return spi::make_provider(std::make_shared<LeaseBackend>(std::move(options)), uri.redacted());
  }
  return spi::make_provider(std::make_shared<PgBackend>(std::move(options)), uri.redacted());
}

const bool registered = spi::register_schemes({"postgres", "postgresql"}, open_postgres);

}  // namespace
}  // namespace dlock::postgres
