// eventually(): waits for a condition another thread brings about, for the core's tests.
#pragma once

#include <chrono>
#include <thread>

namespace dlock::testing {

// Checks `pred` every millisecond until it holds (true) or `limit` has passed (false).
template <class P>
bool eventually(P pred, std::chrono::steady_clock::duration limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace dlock::testing
