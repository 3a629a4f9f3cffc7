// Puts mysql://, mariadb:// and mysql+unix:// into dlock::open's registry.
#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/spi/registrar.h"
#include "dlock/uri.h"
#include "options.h"
#include "lease_backend.h"
#include "row_backend.h"

namespace dlock::mysql {
namespace {

std::shared_ptr<ILockProvider> open_mysql(const Uri& uri) {
  MysqlOptions options = parse_options(uri);
  if (options.mode == Mode::lease) {
    return spi::make_provider(std::make_shared<LeaseBackend>(std::move(options)), uri.redacted());
  }
  return spi::make_provider(std::make_shared<RowBackend>(std::move(options)), uri.redacted());
}

const bool registered = spi::register_schemes({"mysql", "mariadb", "mysql+unix"}, open_mysql);

}  // namespace
}  // namespace dlock::mysql
