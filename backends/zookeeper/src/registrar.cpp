// Puts zk:// and zookeeper:// into dlock::open's registry, and zks:// to refuse it with
// the reason (no TLS in Debian's C client) rather than "unknown scheme".
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/spi/registrar.h"
#include "dlock/uri.h"
#include "options.h"
#include "zk_backend.h"

namespace dlock::zookeeper {
namespace {

std::shared_ptr<ILockProvider> open_zk(const Uri& uri) {
  auto backend = std::make_shared<ZkBackend>(parse_options(uri));
  return spi::make_provider(std::move(backend), uri.redacted());
}

// zks:// is refused by parse_options with `unsupported`.
const bool registered = spi::register_schemes({"zk", "zookeeper", "zks"}, open_zk);

}  // namespace
}  // namespace dlock::zookeeper
