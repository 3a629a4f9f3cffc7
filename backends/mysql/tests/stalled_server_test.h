// What the tests that stall the test server's mariadbd (stopped_server.h) share: a fixture
// that needs the server and its servers.sh, and polling with a bound.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dlock/dlock.h"
#include "stopped_server.h"
#include "test_db.h"

namespace dlock::mysql::test {

// A fresh database on the test server; fails the test when the server or DLOCK_SERVERS_SCRIPT
// (needed to find mariadbd's pid) is missing.
class StalledServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(server_uri().empty()) << kNoServerMessage;
    ASSERT_FALSE(servers_script().empty())
        << "DLOCK_SERVERS_SCRIPT not set (eval \"$(scripts/servers.sh env)\")";
    db_ = std::make_unique<TestDb>();
  }
  std::unique_ptr<TestDb> db_;
};

// Whether `done()` became true within `limit` (polled every ms).
template <class F>
bool within(std::chrono::milliseconds limit, F done) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Whether `p` granted `name` (asked every ms; `unavailable` counts as not yet) within
// `limit`; the hold is left in `l`.
inline bool grant_within(ILockProvider& p, const std::string& name,
                         std::chrono::milliseconds limit, std::optional<Lease>& l) {
  return within(limit, [&] {
    try {
      l = p.try_lock(name);
    } catch (const Error&) {
      l.reset();
    }
    return l.has_value();
  });
}

}  // namespace dlock::mysql::test
