// Test hooks. The ZooKeeper sessions this process holds open, so a test can make the server
// expire one (open a second handle with the same id and password, then close it: the
// server then expires the first, as it would after a long network partition); and counters
// of the acquires' listings. Only the conformance suite and the backend's own tests use
// them; nothing here leaves the process.
#pragma once

#include <array>
#include <chrono>
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

// Process-wide, since the process started: how often a waiter listed the children again
// (a watched node went while older ones it did not watch were still in its snapshot, or a
// listing had failed), and how many grants came in the same attempt as such a listing: a
// hand-off that paid a round trip after the watch event instead of granting from the
// snapshot; and how often an acquire listed the children right after creating its node
// (its node was not alone: an uncontended acquire never lists).
struct WaitCounters {
  std::uint64_t relists = 0;
  std::uint64_t grants_after_relist = 0;
  std::uint64_t first_listings = 0;
};
WaitCounters wait_counters();

// Makes every session opened from now on pause for `pause` right after its client's thread
// has started, before its constructor returns (zero: no pause), so that the session's first
// events (connected, say) arrive while it is still being built.
void set_pause_after_session_start(std::chrono::milliseconds pause);

}  // namespace dlock::zookeeper::testing
