#include "mem_space.h"

#include <pthread.h>

#include <atomic>
#include <new>

#include "dlock/backends/mem.h"

namespace dlock::mem {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Space>> spaces;  // guarded by mu
};

std::atomic<Registry*> current{nullptr};

// A forked child starts with no spaces: its parent's holds are not its own, and a mutex a
// parent thread held at the fork would stay locked in the child for ever. The parent's
// registry is left behind, never touched again (only the parent's providers, which the child
// must not use, still point into it). Runs in the child's only thread, before anything else.
void in_child() noexcept {
  if (auto* fresh = new (std::nothrow) Registry) current.store(fresh);
}

Registry& registry() {
  static Registry* const first = [] {
    // If registration fails (ENOMEM), a forked child shares the copied tables: as without it.
    ::pthread_atfork(nullptr, nullptr, &in_child);
    auto* r = new Registry;  // never destroyed: spaces outlive static destructors
    current.store(r);
    return r;
  }();
  static_cast<void>(first);
  return *current.load();
}

}  // namespace

std::shared_ptr<Space> space(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto& s = r.spaces[name];
  if (!s) s = std::make_shared<Space>();
  return s;
}

void break_lock(std::string_view space_name, std::string_view name) {
  auto s = space(std::string(space_name));
  std::lock_guard lock(s->mu);
  auto it = s->entries.find(std::string(name));
  if (it == s->entries.end()) return;
  it->second.writer.clear();
  it->second.writer_lock.reset();
  it->second.readers.clear();
  Space::wake_all(it->second);
  s->erase_if_idle(it);
}

std::vector<std::string> residue(std::string_view space_name) {
  auto s = space(std::string(space_name));
  const auto now = Clock::now();
  std::vector<std::string> out;
  std::lock_guard lock(s->mu);
  for (const auto& [name, e] : s->entries) {
    if (!e.writer.empty() && e.writer_expiry > now) out.push_back(name + ": writer " + e.writer);
    for (const auto& [owner, hold] : e.readers) {
      if (hold.expiry > now) out.push_back(name + ": reader " + owner);
    }
    for (const auto& [waiter, deadline] : e.waiting_writers) out.push_back(name + ": preferred writer " + waiter);
    for (const auto& [waiter, deadline] : e.fair_queue) out.push_back(name + ": queued " + waiter);
    if (!e.wakers.empty()) out.push_back(name + ": " + std::to_string(e.wakers.size()) + " wake-ups");
    if (e.idle()) out.push_back(name + ": an idle entry left in the table");
  }
  return out;
}

}  // namespace dlock::mem
