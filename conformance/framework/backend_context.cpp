#include "backend_context.h"

#include <algorithm>
#include <stdexcept>

namespace dlock::conformance {
namespace {

std::vector<BackendContext>& contexts() {
  static std::vector<BackendContext> all;
  return all;
}

std::vector<std::string>& selection() {
  static std::vector<std::string> chosen;
  return chosen;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto at = text.find(sep);
    const auto part = text.substr(0, at);
    if (!part.empty()) out.emplace_back(part);
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return out;
}

}  // namespace

void BackendEnv::restart_server() {
  throw std::runtime_error("this backend has no restartable test server");
}

void BackendEnv::expire_sessions() {
  throw std::runtime_error("this backend cannot expire sessions from outside");
}

void BackendEnv::stop_member(int) { throw std::runtime_error("this backend has no ensemble"); }

void BackendEnv::start_member(int) { throw std::runtime_error("this backend has no ensemble"); }

void register_context(BackendContext context) { contexts().push_back(std::move(context)); }

const std::vector<BackendContext>& registered_contexts() { return contexts(); }

const BackendContext* find_context(std::string_view backend) {
  for (const auto& c : contexts()) {
    if (c.backend == backend) return &c;
  }
  return nullptr;
}

void select_backends(std::vector<std::string> backends) { selection() = std::move(backends); }

std::vector<std::string> selected_backends() {
  if (!selection().empty()) return selection();
  std::vector<std::string> all;
  for (const auto& c : contexts()) all.push_back(c.backend);
  return all;
}

std::vector<std::string> compiled_backends() {
#ifdef DLOCK_COMPILED_BACKENDS
  return split(DLOCK_COMPILED_BACKENDS, ';');
#else
#error "the build must define DLOCK_COMPILED_BACKENDS (see conformance/CMakeLists.txt)"
#endif
}

}  // namespace dlock::conformance
