// Puts mem:// into dlock::open's registry when the library is linked (whole-archive).
#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/spi/registrar.h"
#include "mem_backend.h"

namespace dlock::mem {
namespace {

std::shared_ptr<ILockProvider> open_mem(const Uri& uri) {
  UriParams params(uri);  // its redacted() shows no unread parameter's value
  if (!uri.user.empty() || uri.password || uri.hosts.size() > 1 ||
      (!uri.hosts.empty() && uri.hosts[0].port != 0) || !uri.path.empty()) {
    throw Error(ErrorCode::invalid_argument,
                "bad URI '" + params.redacted() + "': mem:// takes only a space name: mem://[SPACE][?lease=…]");
  }
  auto lease = params.take_duration("lease").value_or(std::chrono::milliseconds(30000));
  params.finish();
  std::string space_name = uri.hosts.empty() ? "" : uri.hosts[0].host;
  return spi::make_provider(std::make_shared<MemBackend>(space(space_name), lease), uri.redacted());
}

const bool registered = spi::register_schemes({"mem"}, open_mem);

}  // namespace
}  // namespace dlock::mem
