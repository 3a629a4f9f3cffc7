#include "mem_space.h"

#include "dlock/backends/mem.h"

namespace dlock::mem {

std::shared_ptr<Space> space(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Space>> spaces;
  std::lock_guard lock(mu);
  auto& s = spaces[name];
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
  }
  return out;
}

}  // namespace dlock::mem
