#include "dlock/spi/backend_provider.h"

#include "lost_signal.h"
#include "provider_core.h"

namespace dlock::spi {
namespace {

class BackendProvider final : public ILockProvider {
 public:
  BackendProvider(std::shared_ptr<Backend> backend, std::string uri)
      : core_(std::make_shared<detail::ProviderCore>(std::move(backend))), uri_(std::move(uri)) {}
  // Dropped in a lost callback, maybe on the backend's own thread: the core (the backend
  // with it) must not end there; the watchdog's worker drops this reference.
  ~BackendProvider() override {
    if (!detail::firing_lost_signal()) return;
    detail::ProviderCore& core = *core_;
    core.dispose(std::move(core_));
  }

  const Capabilities& capabilities() const noexcept override { return core_->capabilities(); }
  const std::string& uri() const noexcept override { return uri_; }
  std::optional<Lease> try_acquire(std::string_view name, LockMode mode, Wait wait,
                                   const AcquireOptions& options) override {
    return core_->try_acquire(name, mode, wait, options);
  }

 private:
  std::shared_ptr<detail::ProviderCore> core_;
  std::string uri_;
};

}  // namespace

std::shared_ptr<ILockProvider> make_provider(std::shared_ptr<Backend> backend, std::string redacted_uri) {
  return std::make_shared<BackendProvider>(std::move(backend), std::move(redacted_uri));
}

}  // namespace dlock::spi
