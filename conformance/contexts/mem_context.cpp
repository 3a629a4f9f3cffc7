// mem://SPACE: one lock table per space, shared by every mem:// provider of the process.
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/backend_context.h"

#if __has_include("dlock/backends/mem.h")
#include "dlock/backends/mem.h"
#define DLOCK_CONF_HAVE_MEM_HOOK 1
#endif

namespace dlock::conformance {
namespace {

// Each case gets its own space, mem://conf-<n>: one lock table no other case sees.
class MemEnv final : public BackendEnv {
 public:
  MemEnv() {
    static std::atomic<int> counter{0};
    space_ = "conf-" + std::to_string(counter++);
  }

  std::string uri(const UriOptions&) const override { return "mem://" + space_ + "?lease=1s"; }

  std::vector<std::string> residue() const override {
#ifdef DLOCK_CONF_HAVE_MEM_HOOK
    return dlock::mem::residue(space_);
#else
    return {};
#endif
  }

  void sabotage(std::string_view name) override {
#ifdef DLOCK_CONF_HAVE_MEM_HOOK
    dlock::mem::break_lock(space_, name);
#else
    (void)name;
    throw std::runtime_error("mem saboteur: dlock/backends/mem.h has no break_lock hook");
#endif
  }

 private:
  std::string space_;
};

BackendContext make() {
  BackendContext c;
  c.backend = "mem";
  c.scheme = "mem";
  c.claims.reentrant = true;
  c.claims.read_write = true;
  c.claims.fair = true;
  c.claims.fencing = true;
  c.claims.push_wakeup = true;
  c.claims.liveness = Liveness::lease;
  c.short_lease = std::chrono::milliseconds(1000);
  c.tolerance = std::chrono::milliseconds(300);
  c.malformed_uris = {{"mem://?bogus=1", "bogus"},
                      {"mem://?lease=fast", "lease"},
                      {"mem://space:123", "space name"},
                      {"mem://space/path", "space name"},
                      {"mem://user@space", "space name"}};
  c.make_env = [] { return std::make_unique<MemEnv>(); };
  return c;
}

const Registrar registrar(&make);

}  // namespace
}  // namespace dlock::conformance
