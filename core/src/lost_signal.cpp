#include "lost_signal.h"

namespace dlock::detail {
namespace {

thread_local int firing_depth = 0;
// Callbacks retired while this thread fired a lost signal.
thread_local std::vector<std::unique_ptr<LostCallback>> retired;

}  // namespace

void fire_lost_signal(std::stop_source& lost) noexcept {
  ++firing_depth;
  lost.request_stop();
  if (firing_depth == 1) {
    // Still firing meanwhile: what a retired callback owns (a Lease it captured) may retire
    // more when it dies.
    while (!retired.empty()) {
      auto batch = std::move(retired);
      retired.clear();
      batch.clear();
    }
  }
  --firing_depth;
}

bool firing_lost_signal() noexcept { return firing_depth > 0; }

void retire(std::vector<std::unique_ptr<LostCallback>>&& callbacks) noexcept {
  if (firing_depth == 0) {
    callbacks.clear();
    return;
  }
  for (auto& c : callbacks) {
    try {
      retired.push_back(std::move(c));
    } catch (...) {
      static_cast<void>(c.release());  // out of memory: leaked rather than destroyed while it may run
    }
  }
  callbacks.clear();
}

}  // namespace dlock::detail
