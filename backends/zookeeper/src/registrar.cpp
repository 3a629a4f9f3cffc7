// Puts zk:// and zookeeper:// into dlock::open's registry, and zks:// to refuse it with
// the reason (no TLS in Debian's C client) rather than "unknown scheme".
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/uri.h"
#include "options.h"
#include "zk_backend.h"

namespace dlock::zookeeper {
namespace {

std::shared_ptr<ILockProvider> open_zk(const Uri& uri) {
  auto backend = std::make_shared<ZkBackend>(parse_options(uri));
  return spi::make_provider(std::move(backend), uri.redacted());
}

const bool registered = [] {
  register_scheme("zk", open_zk);
  register_scheme("zookeeper", open_zk);
  register_scheme("zks", open_zk);  // parse_options refuses it with `unsupported`
  return true;
}();

}  // namespace
}  // namespace dlock::zookeeper
