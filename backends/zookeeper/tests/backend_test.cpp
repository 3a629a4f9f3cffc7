// Integration tests of the zookeeper backend against a real server (labels zookeeper;
// integration): node layout, fencing token = czxid, try-once leaves nothing, open errors,
// session expiry fan-out, digest ACLs.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "errors.h"
#include "names.h"
#include "test_server.h"
#include "testing.h"

namespace dlock::zookeeper::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

ErrorCode open_error(const std::string& uri, std::string* msg = nullptr) {
  try {
    auto p = dlock::open(uri);
    (void)p->try_lock("x");
  } catch (const Error& e) {
    if (msg) *msg = e.message();
    return e.code();
  }
  ADD_FAILURE() << uri << " opened and locked";
  return ErrorCode::internal;
}

TEST(ZkBackend, NodeLayoutAndTokenIsTheNodesCzxid) {
  const auto prefix = fresh_prefix();
  auto p = dlock::open(uri_for(prefix));
  EXPECT_EQ(p->capabilities().liveness, Liveness::session);
  EXPECT_EQ(p->capabilities().default_lease, 1000ms);  // the negotiated S
  auto lease = p->try_lock("orders/42.x");
  ASSERT_TRUE(lease);
  auto zh = raw();
  const std::string parent = "/" + prefix + "/" + encode_name("orders/42.x");
  EXPECT_EQ(parent, "/" + prefix + "/orders%2F42%2Ex");
  auto kids = children(zh.get(), parent);
  ASSERT_EQ(kids.size(), 1u);
  auto child = parse_child(kids[0]);
  ASSERT_TRUE(child);
  EXPECT_EQ(child->mode, 'x');
  Stat st{};
  ASSERT_EQ(zoo_exists(zh.get(), (parent + "/" + kids[0]).c_str(), 0, &st), ZOK);
  EXPECT_EQ(lease->fencing_token(), static_cast<std::uint64_t>(st.czxid));
  EXPECT_NE(st.ephemeralOwner, 0);
  EXPECT_TRUE(lease->release());
  EXPECT_TRUE(children(zh.get(), parent).empty());
  // The per-name parent is a container: the server reaps it once empty (the test server
  // checks every second: -Dznode.container.checkIntervalMs=1000 in scripts/servers.sh).
  const auto deadline = Clock::now() + 5s;
  while (zoo_exists(zh.get(), parent.c_str(), 0, nullptr) == ZOK && Clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(zoo_exists(zh.get(), parent.c_str(), 0, nullptr), ZNONODE) << "the empty container stayed";
  // And the name still works after its container was reaped.
  auto again = p->try_lock("orders/42.x");
  ASSERT_TRUE(again);
  EXPECT_GT(again->fencing_token(), lease->fencing_token());
}

// The backend loads the single-threaded C client (src/c_client.h), while this binary links
// the multi-threaded one for its helpers: both builds export the same names, internal ones
// included, and each must still run its own code (bound to the other's, the backend's first
// request crashes). Both clients look at the same nodes here, turn about.
TEST(ZkBackend, RunsBesideTheMultiThreadedClientInOneProcess) {
  const auto prefix = fresh_prefix();
  auto zh = raw();
  auto p = dlock::open(uri_for(prefix));
  void* mt = dlopen("libzookeeper_mt.so.2", RTLD_NOW | RTLD_NOLOAD);
  void* st = dlopen("libzookeeper_st.so.2", RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(mt, nullptr) << "this test binary should link the multi-threaded client";
  EXPECT_NE(st, nullptr) << "the backend should have loaded the single-threaded client";
  const std::string parent = "/" + prefix + "/" + encode_name("both");
  for (int i = 0; i < 20; ++i) {
    auto lease = p->try_lock("both");
    ASSERT_TRUE(lease);
    EXPECT_EQ(children(zh.get(), parent).size(), 1u);
    EXPECT_TRUE(lease->release());
    EXPECT_TRUE(children(zh.get(), parent).empty());
  }
  if (mt != nullptr) dlclose(mt);
  if (st != nullptr) dlclose(st);
}

TEST(ZkBackend, AnUncontendedAcquireListsNoChildren) {
  // The create and the count of the container's children are one transaction: a node that
  // is alone holds the lock without a listing (a listing behind a write waits for its
  // commit: about one round trip more, the cost of the uncontended acquire).
  const auto prefix = fresh_prefix();
  auto a = dlock::open(uri_for(prefix));
  auto b = dlock::open(uri_for(prefix));
  const auto before = testing::wait_counters();
  for (int i = 0; i < 5; ++i) {
    auto lease = a->try_lock("alone");
    ASSERT_TRUE(lease);
    auto shared = a->try_lock_shared("alone-shared");
    ASSERT_TRUE(shared);
    EXPECT_TRUE(lease->release());
    EXPECT_TRUE(shared->release());
  }
  EXPECT_EQ(testing::wait_counters().first_listings - before.first_listings, 0u);

  // A node that is not alone lists: a busy try, a second reader (which shares the lock).
  auto held = a->try_lock("busy");
  ASSERT_TRUE(held);
  EXPECT_FALSE(b->try_lock("busy"));
  auto r1 = a->try_lock_shared("readers");
  auto r2 = b->try_lock_shared("readers");
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2) << "a second reader is granted beside the first";
  EXPECT_EQ(testing::wait_counters().first_listings - before.first_listings, 2u);
  EXPECT_TRUE(held->release());
  EXPECT_TRUE(r1->release());
  EXPECT_TRUE(r2->release());
  auto zh = raw();
  EXPECT_TRUE(lock_nodes(zh.get(), prefix).empty());
}

TEST(ZkBackend, SIsTheNegotiatedTimeoutAlsoWhenTheServerRaisesIt) {
  // The server clamps the session timeout asked for to its [min,max]SessionTimeout (the test
  // server's minimum is 1 s); S, and every bound derived from it, is what it granted.
  const auto granted = std::chrono::milliseconds(granted_timeout_ms(100));
  ASSERT_GT(granted, 100ms) << "the test server no longer raises a 100ms session timeout";
  auto p = dlock::open("zk://" + hosts() + "/?prefix=" + fresh_prefix() + "&session_timeout=100ms");
  const auto& caps = p->capabilities();
  EXPECT_EQ(caps.default_lease, granted);
  EXPECT_EQ(caps.lost_signal_bound, granted);
  EXPECT_EQ(caps.crash_release_bound, granted + granted / 2);
}

// The client's thread may report the session's first event (connected) before the session's
// constructor has returned: on a busy machine the opening thread can lose the CPU for longer
// than the server takes to answer. The pause stands in for that.
TEST(ZkBackend, ASessionWhoseFirstEventComesBeforeItsConstructorEndsWorks) {
  const auto prefix = fresh_prefix();
  testing::set_pause_after_session_start(300ms);
  std::shared_ptr<ILockProvider> p;
  try {
    p = dlock::open(uri_for(prefix));
  } catch (...) {
    testing::set_pause_after_session_start(0ms);
    throw;
  }
  testing::set_pause_after_session_start(0ms);
  auto held = p->try_lock("n");
  ASSERT_TRUE(held);
  EXPECT_TRUE(held->release());
}

TEST(ZkBackend, TryOnceWhenBusyLeavesNoNode) {
  const auto prefix = fresh_prefix();
  auto a = dlock::open(uri_for(prefix));
  auto b = dlock::open(uri_for(prefix));
  auto held = a->try_lock("n");
  ASSERT_TRUE(held);
  auto zh = raw();
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(b->try_lock("n"));
  // The busy attempt's delete is not awaited; it lands within a round trip or two.
  const auto deadline = Clock::now() + 2s;
  while (lock_nodes(zh.get(), prefix).size() != 1 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(lock_nodes(zh.get(), prefix).size(), 1u);
  EXPECT_TRUE(held->release());
  EXPECT_TRUE(lock_nodes(zh.get(), prefix).empty());
}

TEST(ZkBackend, WaiterIsHandedTheLockAndTokensIncrease) {
  const auto prefix = fresh_prefix();
  auto a = dlock::open(uri_for(prefix));
  auto b = dlock::open(uri_for(prefix));
  auto first = a->try_lock("n");
  ASSERT_TRUE(first);
  const auto t1 = first->fencing_token();
  std::atomic<std::uint64_t> t2{0};
  std::thread waiter([&] {
    auto l = b->try_lock("n", Wait::for_duration(5s));
    if (l) {
      t2 = l->fencing_token();
      l->release();
    }
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(first->release());
  waiter.join();
  EXPECT_GT(t2.load(), t1);
}

TEST(ZkBackend, HandOffsDownAQueueGrantFromTheSnapshotWithoutListing) {
  // A holder and three waiters, queued in turn on four sessions: the last one's snapshot
  // holds the holder and both waiters ahead. Each release must hand the lock to the next
  // waiter on the strength of the watch event alone: a listing after the event would put a
  // round trip on every hand-off (the last two waiters' snapshots still hold nodes that went
  // without them hearing of it).
  const auto prefix = fresh_prefix();
  auto zh = raw();
  std::vector<std::shared_ptr<ILockProvider>> p;
  for (int i = 0; i < 4; ++i) p.push_back(dlock::open(uri_for(prefix)));
  auto holder = p[0]->try_lock("q");
  ASSERT_TRUE(holder);

  constexpr int kWaiters = 3;
  std::atomic<bool> granted[kWaiters + 1] = {};
  std::atomic<bool> release_now[kWaiters + 1] = {};
  std::vector<std::thread> waiters;
  for (int i = 1; i <= kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      auto l = p[static_cast<std::size_t>(i)]->try_lock("q", Wait::for_duration(20s));
      if (!l) return;
      granted[i] = true;
      (void)eventually([&] { return release_now[i].load(); }, 10s);
      l->release();
    });
    ASSERT_TRUE(eventually([&] { return lock_nodes(zh.get(), prefix).size() == static_cast<std::size_t>(i + 1); }, 10s))
        << "waiter " << i << " did not queue";
  }

  const auto before = testing::wait_counters();
  EXPECT_TRUE(holder->release());
  for (int i = 1; i <= kWaiters; ++i) {
    ASSERT_TRUE(eventually([&] { return granted[i].load(); }, 10s)) << "waiter " << i << " was not granted";
    // The waiters behind settle their snapshots while this one holds the lock, off the
    // hand-off's path: the last waiter lists once, when the first one's node goes (it
    // watches the two nodes ahead of it; the holder's went unseen).
    const std::uint64_t settled[] = {0, 0, 1, 1};
    (void)eventually([&] { return testing::wait_counters().relists - before.relists >= settled[i]; }, 10s);
    release_now[i] = true;
  }
  for (auto& t : waiters) t.join();
  const auto after = testing::wait_counters();
  EXPECT_EQ(after.grants_after_relist - before.grants_after_relist, 0u)
      << "hand-offs that listed the children after the watch event";
  EXPECT_LE(after.relists - before.relists, static_cast<std::uint64_t>(kWaiters)) << "listings by the waiters";
  EXPECT_TRUE(lock_nodes(zh.get(), prefix).empty());
}

TEST(ZkBackend, MissingChrootIsAClearError) {
  std::string msg;
  EXPECT_EQ(open_error("zk://" + hosts() + "/no-such-chroot-here?connect_timeout=1s", &msg),
            ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("/no-such-chroot-here"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

TEST(ZkBackend, ExistingChrootHoldsThePrefix) {
  auto zh = raw();
  const std::string chroot = "/" + fresh_prefix();
  ASSERT_EQ(zoo_create(zh.get(), chroot.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0), ZOK);
  auto p = dlock::open("zk://" + hosts() + chroot + "?prefix=locks&session_timeout=1s");
  auto l = p->try_lock("a");
  ASSERT_TRUE(l);
  EXPECT_EQ(children(zh.get(), chroot + "/locks/a").size(), 1u);
  EXPECT_TRUE(l->release());
}

// Forwards every connection made to [::1]:port() of this object to the test server (which
// listens on 127.0.0.1 only), until destroyed.
class Ipv6Forwarder {
 public:
  Ipv6Forwarder() {
    listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 8) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("cannot listen on [::1]");
    }
    port_ = ntohs(a.sin6_port);
    acceptor_ = std::thread([this] { run(); });
  }
  ~Ipv6Forwarder() {
    stop_ = true;
    acceptor_.join();
    for (auto& t : pumps_) t.join();
    ::close(listen_fd_);
  }
  std::uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int in = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0) continue;
      ++accepted_;
      const int out = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in s{};
      s.sin_family = AF_INET;
      s.sin_port = htons(test::port());
      ::inet_pton(AF_INET, "127.0.0.1", &s.sin_addr);
      if (out < 0 || ::connect(out, reinterpret_cast<sockaddr*>(&s), sizeof s) != 0) {
        ::close(in);
        if (out >= 0) ::close(out);
        continue;
      }
      pumps_.emplace_back([this, in, out] { pump(in, out); });
    }
  }
  void pump(int a, int b) {
    char buf[16384];
    while (!stop_) {
      pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2; ++i) {
        if (!p[i].revents) continue;
        const ssize_t n = ::recv(p[i].fd, buf, sizeof buf, 0);
        if (n <= 0 || ::send(p[1 - i].fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) closed = true;
      }
      if (closed) break;
    }
    ::close(a);
    ::close(b);
  }

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;  // only the acceptor adds, before the destructor joins it
};

TEST(ZkBackend, AnIpv6LiteralHostConnects) {
  // zk://[::1]:port: the C client must be given "::1:port" (it does not resolve "[::1]").
  Ipv6Forwarder v6;
  const auto prefix = fresh_prefix();
  std::optional<Lease> l;
  try {
    auto p = dlock::open("zk://[::1]:" + std::to_string(v6.port()) + "/?prefix=" + prefix +
                         "&session_timeout=1s&connect_timeout=2s");
    l = p->try_lock("n");
    ASSERT_TRUE(l);
    auto zh = raw();
    EXPECT_EQ(lock_nodes(zh.get(), prefix).size(), 1u) << "the lock node is not on the server";
    EXPECT_TRUE(l->release());
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << " (connections to [::1]: " << v6.accepted() << ")";
  }
  EXPECT_GE(v6.accepted(), 1);
}

TEST(ZkBackend, AChrootDeletedAfterOpenIsTheSameClearError) {
  // The chroot is checked at open; deleted later, the next acquire finds it missing when it
  // re-creates the prefix node: the same invalid_argument as at open, not an internal error.
  auto zh = raw();
  const std::string chroot = "/" + fresh_prefix();
  ASSERT_EQ(zoo_create(zh.get(), chroot.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0), ZOK);
  auto p = dlock::open("zk://" + hosts() + chroot + "?prefix=locks&session_timeout=1s");
  ASSERT_EQ(zoo_delete(zh.get(), (chroot + "/locks").c_str(), -1), ZOK);
  ASSERT_EQ(zoo_delete(zh.get(), chroot.c_str(), -1), ZOK);
  for (const auto wait : {Wait::try_once(), Wait::for_duration(1s)}) {
    try {
      auto l = p->try_lock("a", wait);
      ADD_FAILURE() << "locked under a deleted chroot";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(e.message().find("the chroot " + chroot + " does not exist"), std::string::npos) << e.what();
    }
  }
}

TEST(ZkBackend, TheUriCheckOfNodeNamesAgreesWithTheServer) {
  // valid_node_name (the prefix and chroot check) refuses what the server refuses, and no
  // more (beyond spaces, which we refuse on purpose).
  auto zh = raw();
  const std::vector<std::string> samples = {"caf\xc3\xa9", "\xe6\x97\xa5", "\xc2\xa0", "\xef\xa4\x80",
                                            "\xc2\x80", "\xc2\x9f", "\xee\x80\x80", "\xef\xa3\xbf",
                                            "\xff", "\xc3", "\xef\xbf\xbd", "\xef\xbf\xb0",
                                            "\xf0\x9f\x98\x80", "\x7f", "\x1b", "~", "%"};
  for (const auto& sample : samples) {
    const std::string path = "/" + fresh_prefix() + "-" + sample;
    const int rc = zoo_create(zh.get(), path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, nullptr, 0);
    EXPECT_TRUE(rc == ZOK || rc == ZBADARGUMENTS) << rc;
    EXPECT_EQ(valid_node_name(path.substr(1)), rc == ZOK) << printable(sample) << ": server answered " << rc;
  }
}

TEST(ZkBackend, ClosedPortIsUnavailableWithinConnectTimeout) {
  const auto start = Clock::now();
  std::string msg;
  EXPECT_EQ(open_error("zk://127.0.0.1:1/?connect_timeout=300ms", &msg), ErrorCode::unavailable);
  EXPECT_LT(Clock::now() - start, 1500ms);
  EXPECT_NE(msg.find("connect_timeout"), std::string::npos) << msg;
}

TEST(ZkBackend, SessionExpiryFiresLostOnEveryHoldAtOnce) {
  const auto prefix = fresh_prefix();
  // S = 4 s: the S-based estimate cannot fire until well over 2 s after the session's last
  // answer, so lost within a round's 1 s window comes from the session event. (With S = 1 s
  // a round whose takeover failed could see the estimate fire after about 700 ms, and
  // nothing told the two apart.)
  auto p = dlock::open("zk://" + hosts() + "/?prefix=" + prefix +
                       "&session_timeout=4s&connect_timeout=1s&command_timeout=1s");
  auto l1 = p->try_lock("a");
  auto l2 = p->try_lock("b");
  auto l3 = p->try_lock_shared("c");
  ASSERT_TRUE(l1 && l2 && l3);
  auto sessions = testing::sessions_under("/" + prefix);
  ASSERT_EQ(sessions.size(), 1u);
  clientid_t id{};
  id.client_id = sessions[0].id;
  std::copy(sessions[0].password.begin(), sessions[0].password.end(), id.passwd);
  auto all_lost = [&] {
    return l1->lost_token().stop_requested() && l2->lost_token().stop_requested() &&
           l3->lost_token().stop_requested();
  };
  // Take the session over with its id and password, then close it: the server ends it. If
  // the provider reconnects in between it takes the session back and the close does not end
  // it, so try a few rounds; each round's timing is what is checked.
  Clock::duration took{};
  for (int round = 0; round < 5 && !all_lost(); ++round) {
    zhandle_t* twin = zookeeper_init(hosts().c_str(), nullptr, 1000, &id, nullptr, 0);
    ASSERT_NE(twin, nullptr);
    const auto connected = Clock::now() + 3s;
    while (zoo_state(twin) != ZOO_CONNECTED_STATE && Clock::now() < connected) std::this_thread::sleep_for(2ms);
    zookeeper_close(twin);
    const auto closed = Clock::now();
    while (!all_lost() && Clock::now() < closed + 1s) std::this_thread::sleep_for(1ms);
    took = Clock::now() - closed;
  }
  EXPECT_TRUE(l1->lost_token().stop_requested());
  EXPECT_TRUE(l2->lost_token().stop_requested());
  EXPECT_TRUE(l3->lost_token().stop_requested());
  EXPECT_LT(took, 500ms) << "lost must come from the session event, not the S-based estimate";
  // A new session serves the same provider; the names are free (the old nodes died).
  auto again = p->try_lock("a", Wait::for_duration(2s));
  ASSERT_TRUE(again);
  EXPECT_GT(again->fencing_token(), l1->fencing_token());
  EXPECT_TRUE(again->release());
}

TEST(ZkBackend, DigestCredentialsProtectTheNodes) {
  const auto prefix = fresh_prefix();
  auto p = dlock::open("zk://alice:pw-alice@" + hosts() + "/?prefix=" + prefix + "&session_timeout=1s");
  EXPECT_EQ(p->uri().find("pw-alice"), std::string::npos);
  auto l = p->try_lock("n");
  ASSERT_TRUE(l);
  auto alice = raw("alice:pw-alice");
  auto nodes = lock_nodes(alice.get(), prefix);
  ASSERT_EQ(nodes.size(), 1u);
  auto mallory = raw("mallory:other");
  String_vector v{};
  EXPECT_EQ(zoo_get_children(mallory.get(), ("/" + prefix).c_str(), 0, &v), ZNOAUTH);
  EXPECT_EQ(zoo_delete(mallory.get(), nodes[0].c_str(), -1), ZNOAUTH);
  // Another identity cannot queue on a name alice's container protects: a clear error.
  std::string msg;
  try {
    auto q = dlock::open("zk://mallory:other@" + hosts() + "/?prefix=" + prefix + "&session_timeout=1s");
    (void)q->try_lock("n");
    ADD_FAILURE() << "mallory queued under alice's container";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(prefix), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("other"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(l->release());
}

TEST(ZkBackend, APredecessorWhoseAclDeniesUsIsAClearErrorNotABusyLoop) {
  // A node ahead of ours made by another identity (CREATOR_ALL) cannot be watched: getData
  // answers ZNOAUTH. The waiter must fail naming that node, not set the watch again at once
  // after each refusal (thousands of requests a second for the whole wait).
  const auto prefix = fresh_prefix();
  auto zh = raw();
  const std::string parent = "/" + prefix + "/n";
  ASSERT_EQ(zoo_create(zh.get(), ("/" + prefix).c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0), ZOK);
  ASSERT_EQ(zoo_create(zh.get(), parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0), ZOK);
  auto u1 = raw("u1:pw1");
  char made[512] = {};
  ASSERT_EQ(zoo_create(u1.get(), (parent + "/x-0123456789abcdef-").c_str(), "", 0, &ZOO_CREATOR_ALL_ACL,
                       ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made),
            ZOK);
  auto p = dlock::open("zk://u2:pw2@" + hosts() + "/?prefix=" + prefix + "&session_timeout=1s&command_timeout=1s");
  const long before = mntr_value("zk_packets_received");
  try {
    auto l = p->try_lock("n", Wait::for_duration(2s));
    ADD_FAILURE() << "the wait ended without an error (granted: " << bool(l) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(made), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("pw2"), std::string::npos) << e.what();
  }
  // The acquire's create, listing, watch and delete, plus pings: a handful, not thousands.
  const long packets = mntr_value("zk_packets_received") - before;
  EXPECT_LT(packets, 100) << "requests the server received during the wait";
  EXPECT_TRUE(eventually([&] { return children(zh.get(), parent).size() == 1; }, 2s)) << "our node stayed";
}

}  // namespace
}  // namespace dlock::zookeeper::test
