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
  it->second.readers.clear();
  Space::wake_all(it->second);
}

}  // namespace dlock::mem
