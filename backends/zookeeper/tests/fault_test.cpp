// Network faults around a lock node's create and delete (labels zookeeper;integration),
// through the conformance suite's TCP fault proxy: an answer lost after the server acted
// must never leave an orphan node that blocks the name for the life of the session.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "dlock/dlock.h"
#include "framework/tcp_proxy.h"
#include "test_server.h"
#include "testing.h"

namespace dlock::zookeeper::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using conformance::TcpProxy;

// Through the proxy; S = 2 s so the session outlives the short faults below (the server
// still hears the client's pings while the answers are dropped).
std::string proxied_uri(const TcpProxy& proxy, const std::string& prefix) {
  return "zk://127.0.0.1:" + std::to_string(proxy.port()) + "/?prefix=" + prefix +
         "&session_timeout=2s&connect_timeout=2s&command_timeout=1s";
}

// A name's parent node made in advance (persistent), so the create under it can land while
// the answers are dropped (the parent's own create would need an answer first).
void make_parent(zhandle_t* zh, const std::string& prefix, const std::string& name) {
  zoo_create(zh, ("/" + prefix).c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  ASSERT_EQ(zoo_create(zh, ("/" + prefix + "/" + name).c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                       nullptr, 0),
            ZOK);
}

// Sets the proxy's mode and gives its pumps time to notice (one may be in its poll).
void switch_to(TcpProxy& proxy, TcpProxy::Mode mode) {
  proxy.set_mode(mode);
  std::this_thread::sleep_for(150ms);
}

// Drops the server's answers until a lock node shows up on the server (the create landed)
// and `longer` after that, then resets the connection: the create's answer is lost for
// good. Dropping for longer than command_timeout makes the acquire give up before the
// client has reconnected (it declares the connection dead after 2/3 S without answers).
void lose_the_create_answer(TcpProxy& proxy, zhandle_t* zh, const std::string& prefix,
                            Clock::duration longer) {
  ASSERT_TRUE(eventually([&] { return !lock_nodes(zh, prefix).empty(); }, 3s)) << "the create never landed";
  std::this_thread::sleep_for(longer);
  proxy.set_mode(TcpProxy::Mode::pass);
  proxy.reset_all();
}

TEST(ZkFaults, CreateAmbiguityLeavesNoOrphan) {
  const auto prefix = fresh_prefix();
  TcpProxy proxy("127.0.0.1", port());
  auto p = dlock::open(proxied_uri(proxy, prefix));
  auto other = dlock::open(uri_for(prefix));
  auto zh = raw();
  make_parent(zh.get(), prefix, "n");
  make_parent(zh.get(), prefix, "m");

  // Try-once: the attempt fails (its answer never came); the node it made must go, whether
  // the client reconnects at once or only after the acquire has given up.
  for (const Clock::duration longer : {Clock::duration(0ms), Clock::duration(1500ms)}) {
    switch_to(proxy, TcpProxy::Mode::drop_replies);
    std::thread lose([&] { lose_the_create_answer(proxy, zh.get(), prefix, longer); });
    try {
      auto l = p->try_lock("n");
      if (l) l->release();  // the client may also have recovered the answer: fine
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
    }
    lose.join();
    EXPECT_TRUE(eventually([&] { return lock_nodes(zh.get(), prefix).empty(); }, 4s))
        << "orphan after a try-once whose create answer was lost (answers dropped "
        << std::chrono::duration_cast<std::chrono::milliseconds>(longer).count() << "ms longer)";
    auto free = other->try_lock("n");
    EXPECT_TRUE(free) << "the name stays blocked";
    if (free) free->release();
  }

  // Waiting: the acquire goes on after the lost answer and must not queue behind its own
  // earlier node (it would wait for itself until the deadline).
  switch_to(proxy, TcpProxy::Mode::drop_replies);
  std::thread lose2([&] { lose_the_create_answer(proxy, zh.get(), prefix, 1500ms); });
  std::optional<Lease> l;
  try {
    l = p->try_lock("m", Wait::for_duration(8s));
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  lose2.join();
  ASSERT_TRUE(l) << "the waiting acquire was not granted";
  EXPECT_EQ(lock_nodes(zh.get(), prefix).size(), 1u) << "an orphan node beside the holder's";
  EXPECT_TRUE(l->release());
  EXPECT_TRUE(eventually([&] { return lock_nodes(zh.get(), prefix).empty(); }, 3s));
}

TEST(ZkFaults, AFailedReleaseKeepsTheHoldAndTriesAgain) {
  // A release that cannot tell throws unavailable and the hold stays (spi::Backend::release,
  // Lease::release): held() stays true through the watchdog's probes, a later release()
  // sends the delete again (it does not answer false from a hold given up behind the
  // caller's back), and once the network is back it deletes the node and returns true.
  // S = 6 s: the cut below stays well inside it (no lost signal is due).
  const auto prefix = fresh_prefix();
  TcpProxy proxy("127.0.0.1", port());
  auto p = dlock::open("zk://127.0.0.1:" + std::to_string(proxy.port()) + "/?prefix=" + prefix +
                       "&session_timeout=6s&connect_timeout=2s&command_timeout=500ms");
  auto zh = raw();
  auto l = p->try_lock("n");
  ASSERT_TRUE(l);
  const auto granted = Clock::now();
  switch_to(proxy, TcpProxy::Mode::blackhole);
  try {
    (void)l->release();
    ADD_FAILURE() << "a release nobody answered returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  EXPECT_TRUE(l->held()) << "the hold was given up after a release that could not tell";
  std::this_thread::sleep_until(granted + 2500ms);  // past the first probe (S/3)
  EXPECT_TRUE(l->held()) << "the watchdog's probe gave the hold up";
  EXPECT_FALSE(l->lost_token().stop_requested());
  const auto again = Clock::now();
  try {
    const bool r = l->release();
    ADD_FAILURE() << "the second release answered " << r << " while the network was cut";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  EXPECT_GE(Clock::now() - again, 400ms) << "the second release did not ask the server";
  EXPECT_TRUE(l->held());
  EXPECT_EQ(lock_nodes(zh.get(), prefix).size(), 1u) << "the node went though the network was cut";

  proxy.set_mode(TcpProxy::Mode::pass);
  proxy.reset_all();
  std::optional<bool> released;
  const auto deadline = Clock::now() + 3s;
  while (!released && Clock::now() < deadline) {
    try {
      released = l->release();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();  // still reconnecting
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(released) << "release kept failing after the network came back";
  EXPECT_TRUE(*released) << "the retried release did not report the node it deleted";
  EXPECT_FALSE(l->held());
  EXPECT_FALSE(l->lost_token().stop_requested()) << "a release fired the lost signal";
  EXPECT_TRUE(lock_nodes(zh.get(), prefix).empty());
  auto next = p->try_lock("n");
  EXPECT_TRUE(next) << "the name stays blocked";
}

TEST(ZkFaults, TheLostSignalWaitsForTheSessionTimeoutTheServerGranted) {
  // Asked for 100 ms, the test server grants 1 s (minSessionTimeout): the server cannot end
  // the session before ~1 s of silence, so a cut must not fire the lost signal after ~100 ms
  // (a holder told "lost" ten times too early, and probed ten times too often), and must
  // fire it within the granted S.
  const auto granted = std::chrono::milliseconds(granted_timeout_ms(100));
  ASSERT_GE(granted, 600ms) << "the test server no longer raises a 100ms session timeout";
  TcpProxy proxy("127.0.0.1", port());
  auto p = dlock::open("zk://127.0.0.1:" + std::to_string(proxy.port()) + "/?prefix=" + fresh_prefix() +
                       "&session_timeout=100ms&connect_timeout=2s&command_timeout=500ms");
  auto l = p->try_lock("n");
  ASSERT_TRUE(l);
  proxy.set_mode(TcpProxy::Mode::blackhole);
  const auto cut = Clock::now();
  ASSERT_TRUE(eventually([&] { return l->lost_token().stop_requested(); }, granted + 2s));
  const auto took = Clock::now() - cut;
  // The last answered probe is at most S/3 before the cut; the signal fires a margin (5%)
  // before S after it.
  EXPECT_GE(took, granted / 2) << "lost fired long before the server could end the session";
  EXPECT_LE(took, granted + 100ms);
}

TEST(ZkFaults, ReleaseDuringDisconnectLeavesNoOrphan) {
  const auto prefix = fresh_prefix();
  TcpProxy proxy("127.0.0.1", port());
  auto p = dlock::open(proxied_uri(proxy, prefix));
  auto other = dlock::open(uri_for(prefix));
  auto zh = raw();

  // A cut shorter than S: the release cannot be confirmed, the session survives, the hold
  // stays, and the holder's next release() deletes the node once the network is back.
  auto l = p->try_lock("n");
  ASSERT_TRUE(l);
  switch_to(proxy, TcpProxy::Mode::blackhole);
  bool confirmed = true;
  try {
    confirmed = l->release();
  } catch (const Error& e) {
    confirmed = false;
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  EXPECT_FALSE(confirmed) << "a release nobody answered was reported as done";
  EXPECT_EQ(lock_nodes(zh.get(), prefix).size(), 1u) << "the node went though the network was cut";
  proxy.set_mode(TcpProxy::Mode::pass);
  proxy.reset_all();  // the client reconnects at once rather than after its own timeout
  bool deleted = false;
  (void)eventually(
      [&] {
        try {
          if (!deleted) deleted = l->release();
        } catch (const Error&) {
          // still reconnecting
        }
        return deleted;
      },
      2s);
  EXPECT_TRUE(deleted) << "the release retried after the session came back did not delete the node";
  EXPECT_TRUE(lock_nodes(zh.get(), prefix).empty()) << "the node stayed after the session came back";
  auto next = other->try_lock("n", Wait::for_duration(2s));
  EXPECT_TRUE(next) << "the name stays blocked";
  if (next) next->release();

  // A cut longer than S: the server ends the session and its node; the provider notices
  // and the name is free for everyone, the provider included.
  auto l2 = p->try_lock("m");
  ASSERT_TRUE(l2);
  switch_to(proxy, TcpProxy::Mode::blackhole);
  try {
    (void)l2->release();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  EXPECT_TRUE(eventually([&] { return lock_nodes(zh.get(), prefix).empty(); }, 4s))
      << "the node outlived its session";
  proxy.set_mode(TcpProxy::Mode::pass);
  proxy.reset_all();
  auto again = p->try_lock("m", Wait::for_duration(4s));
  EXPECT_TRUE(again) << "the provider cannot take the name again";
  if (again) {
    EXPECT_TRUE(again->release());
  }
  EXPECT_TRUE(eventually([&] { return lock_nodes(zh.get(), prefix).empty(); }, 2s));
}

TEST(ZkFaults, AReleaseThatMeetsTheSessionsExpiryReturnsFalse) {
  // The lease contract: release() is false when the lock is no longer held (the session
  // expired: its node is gone); unavailable only when the server could not be reached. Here
  // the server answers the delete with "session expired" before the client has processed
  // the expiry event: the answer is definitive, the hold is over.
  const auto prefix = fresh_prefix();
  TcpProxy proxy("127.0.0.1", port());
  // S = 6 s: the S-based lost signal cannot fire for 2.5 s after the cut, so release()
  // reaches the backend with the hold still held.
  auto p = dlock::open("zk://127.0.0.1:" + std::to_string(proxy.port()) + "/?prefix=" + prefix +
                       "&session_timeout=6s&connect_timeout=5s&command_timeout=5s");
  auto zh = raw();
  auto l = p->try_lock("n");
  ASSERT_TRUE(l);
  // Cut: the client reconnects again and again, refused; requests wait in its queue.
  proxy.set_mode(TcpProxy::Mode::refuse);
  proxy.reset_all();
  // The server ends the session meanwhile (its id taken over by a twin handle, then closed).
  auto sessions = testing::sessions_under("/" + prefix);
  ASSERT_EQ(sessions.size(), 1u);
  clientid_t id{};
  id.client_id = sessions[0].id;
  std::copy(sessions[0].password.begin(), sessions[0].password.end(), id.passwd);
  zhandle_t* twin = zookeeper_init(hosts().c_str(), nullptr, 6000, &id, nullptr, 0);
  ASSERT_NE(twin, nullptr);
  const bool took_over =
      eventually([&] { return zoo_state(twin) == ZOO_CONNECTED_STATE; }, 3s);
  zookeeper_close(twin);
  ASSERT_TRUE(took_over);
  ASSERT_TRUE(eventually([&] { return lock_nodes(zh.get(), prefix).empty(); }, 3s))
      << "the server kept the session's node";
  // The network comes back slow (500 ms each way): the client's handshake is on its way
  // when release() queues the delete behind it, and the server's answer to the handshake,
  // "session expired", fails the queued delete with ZSESSIONEXPIRED before the expiry
  // event is processed. (Were the event first, release() would return false by the
  // dead-session path: the order only decides which path is tested.)
  const int before = proxy.accepted();
  proxy.set_delay(500ms);
  proxy.set_mode(TcpProxy::Mode::pass);
  ASSERT_TRUE(eventually([&] { return proxy.accepted() > before; }, 3s))
      << "the client never came back";
  std::optional<bool> released;
  std::string error;
  try {
    released = l->release();
  } catch (const Error& e) {
    error = e.what();
  }
  proxy.set_delay(0ms);
  EXPECT_TRUE(released) << "release() threw: " << error;
  if (released) {
    EXPECT_FALSE(*released) << "a release after the session expired reported a hold it had";
  }
  EXPECT_FALSE(l->held());
  // The provider goes on in a new session.
  auto again = p->try_lock("n", Wait::for_duration(5s));
  EXPECT_TRUE(again);
  if (again) {
    EXPECT_TRUE(again->release());
  }
}

}  // namespace
}  // namespace dlock::zookeeper::test
