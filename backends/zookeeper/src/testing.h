// Test hook: the ZooKeeper sessions this process holds open, so a test can make the server
// expire one (open a second handle with the same id and password, then close it: the
// server then expires the first, as it would after a long network partition). Only the
// conformance suite and the backend's own tests use it; nothing here leaves the process.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::zookeeper::testing {

struct LiveSession {
  std::string hosts;  // the connect string
  std::int64_t id = 0;
  std::array<char, 16> password{};
  bool dead = false;  // the client has seen it expire
};

// The connected sessions of every provider in this process whose lock root is `root`
// (e.g. "/dlock" or "/chroot/prefix").
std::vector<LiveSession> sessions_under(const std::string& root);

}  // namespace dlock::zookeeper::testing
