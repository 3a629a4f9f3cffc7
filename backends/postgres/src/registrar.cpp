// Puts postgres:// and postgresql:// into dlock::open's registry.
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/uri.h"
#include "options.h"
#include "pg_backend.h"

namespace dlock::postgres {
namespace {

std::shared_ptr<ILockProvider> open_postgres(const Uri& uri) {
  auto backend = std::make_shared<PgBackend>(parse_options(uri));
  return spi::make_provider(std::move(backend), uri.redacted());
}

const bool registered = [] {
  register_scheme("postgres", open_postgres);
  register_scheme("postgresql", open_postgres);
  return true;
}();

}  // namespace
}  // namespace dlock::postgres
