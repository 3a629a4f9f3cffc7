// A program that uses an *installed* dlock, built by scripts/check-install.sh twice: with
// find_package(dlock) and with pkg-config. It proves the installed headers, libraries and
// package files are complete: the backends' registrars survive static linking, and a lock
// can be taken and released. Exits 0 on success, 1 with a message otherwise.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "dlock/dlock.h"

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "consumer: FAILED: %s\n", what.c_str());
  return 1;
}

bool has(const std::vector<std::string>& schemes, const std::string& scheme) {
  return std::find(schemes.begin(), schemes.end(), scheme) != schemes.end();
}

}  // namespace

int main() {
  try {
    const std::vector<std::string> schemes = dlock::registered_schemes();
    std::string listed;
    for (const auto& s : schemes) listed += (listed.empty() ? "" : " ") + s;
    for (const char* want : {"mem", "file"}) {
      if (!has(schemes, want)) {
        return fail(std::string("scheme '") + want + "' not registered (have: " + listed + ")");
      }
    }

    auto provider = dlock::open("mem://consumer");
    std::optional<dlock::Lease> lease = provider->try_lock("consumer-check");
    if (!lease || !lease->held()) return fail("first try_lock did not acquire a free lock");

    dlock::AcquireOptions other;
    other.owner = "another-owner";
    if (provider->try_lock("consumer-check", dlock::Wait::try_once(), other)) {
      return fail("a second owner acquired a held lock");
    }
    if (!lease->release()) return fail("release() of a held lock returned false");
    if (lease->held()) return fail("lease still held after release()");
    std::optional<dlock::Lease> again =
        provider->try_lock("consumer-check", dlock::Wait::try_once(), other);
    if (!again) return fail("the lock was not free after release()");

    std::printf("consumer: ok (schemes: %s)\n", listed.c_str());
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
