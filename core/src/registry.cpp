#include <map>
#include <mutex>

#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/spi/registrar.h"
#include "sync.h"

namespace dlock {
namespace {

struct Registry {
  detail::Mutex mu;
  std::map<std::string, ProviderFactory> factories DLOCK_GUARDED_BY(mu);
};

// A function-local static: backends register from static initializers of other TUs.
Registry& registry() {
  static Registry r;
  return r;
}

std::vector<std::string> schemes_locked(Registry& r) DLOCK_REQUIRES(r.mu) {
  std::vector<std::string> out;
  for (const auto& [scheme, factory] : r.factories) out.push_back(scheme);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s + "://";
  return out.empty() ? "(none)" : out;
}

// False if `scheme` is registered already (its factory stays).
bool add(const std::string& scheme, ProviderFactory factory) {
  auto& r = registry();
  detail::Lock lock(r.mu);
  return r.factories.emplace(scheme, std::move(factory)).second;
}

}  // namespace

void register_scheme(std::string scheme, ProviderFactory factory) {
  if (!add(scheme, std::move(factory))) {
    throw Error(ErrorCode::invalid_argument, "scheme '" + scheme + "' is already registered");
  }
}

namespace spi {
bool register_schemes(std::initializer_list<const char*> schemes, const ProviderFactory& factory) noexcept {
  bool all = true;
  for (const char* scheme : schemes) {
    try {
      all = add(scheme, factory) && all;
    } catch (...) {  // out of memory: the scheme stays unknown, dlock::open says so
      all = false;
    }
  }
  return all;
}
}  // namespace spi

std::vector<std::string> registered_schemes() {
  auto& r = registry();
  detail::Lock lock(r.mu);
  return schemes_locked(r);
}

std::shared_ptr<ILockProvider> open(std::string_view text) {
  Uri uri = Uri::parse(text);
  ProviderFactory factory;
  {
    auto& r = registry();
    detail::Lock lock(r.mu);
    auto it = r.factories.find(uri.scheme);
    if (it == r.factories.end()) {
      throw Error(ErrorCode::invalid_argument, "unknown scheme '" + uri.scheme + "' in " +
                                                   UriParams(uri).redacted() + "; compiled in: " +
                                                   join(schemes_locked(r)));
    }
    factory = it->second;
  }
  return factory(uri);
}

}  // namespace dlock
