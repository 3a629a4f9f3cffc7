#include "owner.h"

#include <cstdio>
#include <functional>
#include <random>
#include <thread>

namespace dlock::detail {

std::string random_client_id() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  return std::string(buf, 32);
}

std::string thread_owner() {
  return "thread-" + std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

}  // namespace dlock::detail
