// Conn: one ZooKeeper session (one zhandle_t), its asynchronous requests, its node watches
// and the holds granted on it.
//
// Threads: the handle's Driver (driver.h) runs one thread per session, which reads the
// answers; completions and watch events run there, after the client's lock is released,
// and only fill Replies or notify WatchSinks; callers send under that lock and wait on
// Replies with their own deadline. A Conn is always owned by a shared_ptr from make_conn(),
// whose deleter hands zookeeper_close to the worker thread (never the driver's thread,
// never a caller that must not block).
//
// A Conn never outlives its session: once expired (or auth failed) it is dead for good,
// every hold on it is marked lost and every watcher is woken; the Client opens a new Conn
// (a new session, a new generation) for later requests. Nothing is ever re-attached.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <zookeeper/zookeeper.h>

#include "dlock/spi/session_holds.h"
#include "driver.h"
#include "options.h"
#include "reply.h"
#include "worker.h"

namespace dlock::zookeeper {

struct CountedCreateReply {
  int rc = 0;
  std::string path;          // the created node (with its sequence suffix)
  std::int64_t czxid = 0;    // the transaction's zxid, which is the created node's czxid
  int siblings = 0;          // the parent's children right after the create, ours included
};
struct ChildrenReply {
  int rc = 0;
  std::vector<std::string> children;
};
struct StatReply {
  int rc = 0;
  std::int64_t czxid = 0;
  std::int64_t owner = 0;  // ephemeralOwner
};

// Told about one watched node. Calls come from the driver's thread: never block.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // The node is gone (deleted, or did not exist when the watch was set).
  virtual void node_gone(const std::string& path) noexcept = 0;
  // The watch could not be set or was triggered by something other than a deletion (a
  // data change, a connection loss before the answer): set it again.
  virtual void watch_failed(const std::string& path) noexcept = 0;
  // The server refused the watch for good (`rc`: ZNOAUTH when the node's ACL denies us
  // READ, or another error that setting it again would only repeat): do not set it again.
  virtual void watch_refused(const std::string& path, int rc) noexcept = 0;
  // The session expired: every node of it is gone, every watch too.
  virtual void session_ended() noexcept = 0;
};

// How long after a basis (Conn::leader_basis) a session of timeout `s` surely lives: s less
// 1% + 2 ms (as backends/redis allows for clock drift).
inline Clock::duration safe_session_span(std::chrono::milliseconds s) noexcept {
  return s - s / 100 - std::chrono::milliseconds(2);
}

class Conn {
 public:
  Conn(const ZkOptions& options, std::uint64_t generation);
  ~Conn();  // zookeeper_close: blocks; only ever run by the worker (see make_conn)
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  std::uint64_t generation() const noexcept { return generation_; }
  // Waits until the session is connected (true), dead or `deadline` (false).
  bool wait_connected(Clock::time_point deadline);
  bool connected() const noexcept { return connected_.load(); }
  // Expired or auth failed: the session and every node of it are gone for good.
  bool dead() const noexcept { return dead_.load(); }
  // The session timeout the server granted (0 before the first CONNECTED).
  std::chrono::milliseconds negotiated_timeout() const noexcept {
    return std::chrono::milliseconds(negotiated_ms_.load());
  }
  std::int64_t session_id() const;
  // The basis of every expiry estimate on this session: the send time of a request whose
  // touch the LEADER is known to have received, so it cannot expire the session before
  // it + S. Only the leader expires sessions, and it hears of our requests only through
  // the touches the member we are connected to forwards on its pings; a follower cut off
  // from the leader goes on answering reads (for syncLimit x tickTime), so an answered read
  // alone proves nothing. What does prove it:
  //  - a request the leader processed (a sync, a write) that was answered OK. The member
  //    forwarded it to the leader on the link that carries its ping answers, after every
  //    ping answer it had already sent; the leader pings every tickTime/2 <= S/4 (the
  //    server grants no session shorter than two ticks), so a request that was ANSWERED
  //    at least L = leader_lag() before that sync or write was SENT reached the member
  //    before some ping, whose answer carried its touch to the leader ahead of the sync or
  //    write (the sync's or write's own touch may not have: the link may break right after);
  //  - on a reconnection (to any member), the leader revalidates (touches) the session
  //    before the member completes the handshake: later than the moment we saw the link
  //    go, so that moment is a basis once we are connected again;
  //  - the session's creation, at the leader, after the Conn was made (the initial basis).
  // A standalone server expires sessions itself: the rule holds there too, only later than
  // it would need to be. Each answered sync or write advances the basis to the newest
  // request answered at least L before it was sent (confirm()).
  Clock::time_point leader_basis() const noexcept {
    return Clock::time_point(Clock::duration(leader_basis_.load()));
  }
  // A request sent at `sent` was answered (any rc but a transport failure), now.
  void answered(Clock::time_point sent) noexcept;
  // A request the leader processed, sent at `sent`, was answered OK.
  void confirm(Clock::time_point sent) noexcept;
  // L for this session: S/4 (the leader's ping interval at most) + 20 ms of
  // scheduling slack for the leader's ping thread.
  Clock::duration leader_lag() const noexcept;
  // Starts the background syncs (one every S/6, while the session lives) that keep
  // leader_basis() within about L + S/3 + a round trip of now; every advance of the basis
  // moves every hold's server expiry too. make_conn() calls it.
  static void keep_alive(std::weak_ptr<Conn> conn, Clock::time_point due);

  // Creates `path` (a container or a persistent node: its name is known) with no data; the
  // answer is the result code.
  std::shared_ptr<Reply<int>> create(const std::string& path, int mode);
  // Creates a child of `parent` (path = parent + "/" + name) and, in the same transaction,
  // writes the parent's data again (empty, any version): the answer then carries the
  // parent's stat as of our create, so the caller learns how many children it has without
  // listing them (a listing pipelined behind a write waits for that write's commit: about a
  // round trip more). Needs WRITE on the parent; we create the parents with our own ACL.
  std::shared_ptr<Reply<CountedCreateReply>> create_counted(const std::string& parent, const std::string& path,
                                                            const std::string& data, int mode);
  std::shared_ptr<Reply<ChildrenReply>> children(const std::string& path);
  std::shared_ptr<Reply<int>> remove(const std::string& path);
  std::shared_ptr<Reply<StatReply>> exists(const std::string& path);
  // A sync: answered (rc) only once the leader has processed it; an OK answer advances
  // leader_basis() before the reply is set.
  std::shared_ptr<Reply<int>> sync();

  // Sets a data watch (getData, never exists: an exists watch on a missing node would stay
  // on the server) on `path` for `sink`, which hears node_gone / watch_failed from the
  // completion or the event. Several sinks may watch one path.
  void watch(const std::string& path, const std::shared_ptr<WatchSink>& sink);
  // Stops telling `sink` about `path`. With `drop_server_watch`, a watch no sink needs any
  // more is also taken off the server (a waiter that gives up: otherwise the watch stays on
  // its predecessor for as long as that node lives). Without it, the watch stays until it
  // fires: for callers whose watched node is gone or about to go (no extra request then).
  void unwatch(const std::string& path, const WatchSink* sink, bool drop_server_watch = false) noexcept;
  // After a watch was set: takes it off the server again if no sink wants it any more (its
  // waiter gave up while the request was on its way, before the client knew of the watch).
  void drop_if_unwatched(const std::string& path) noexcept;

  // Deletes `path` in the background, retrying until it is gone, the session is dead or
  // the process exits (no orphan node after a failed release or an abandoned acquire).
  static void guaranteed_delete(std::shared_ptr<Conn> conn, std::string path);

  // The lock nodes this session created and has not deleted yet. A deletion of one of them
  // may be this very session ending (its ephemerals go first, the EXPIRED event may come
  // later), so a waiter must not take it as a hand-off without asking the server.
  void note_own(const std::string& path);
  void forget_own(const std::string& path) noexcept;
  bool owns(const std::string& path) const;

  spi::SessionHolds& holds() noexcept { return holds_; }
  const ACL_vector* acl() const noexcept;
  const std::string& where() const noexcept { return where_; }

  // For the client's callbacks (run under its lock): `r` runs once the lock is released.
  void report(Driver::Report r);

 private:
  static void global_watcher(zhandle_t*, int type, int state, const char* path, void* ctx);
  static void node_watcher(zhandle_t*, int type, int state, const char* path, void* ctx);
  void on_session_state(int state);
  void notify_path(const std::string& path, bool gone);
  void expire();
  void remove_server_watch_locked(const std::string& path) noexcept;  // watch_mu_ held
  void register_live(zhandle_t* zh) noexcept;  // for testing.h
  void advance_basis(Clock::rep basis) noexcept;

  const std::uint64_t generation_;
  const bool authenticated_;
  const std::string hosts_;
  const std::string root_;
  const std::string where_;
  std::unique_ptr<Driver> driver_;  // the handle; closed first in ~Conn
  std::atomic<bool> connected_{false};
  std::atomic<bool> dead_{false};
  std::atomic<int> negotiated_ms_{0};
  std::atomic<Clock::rep> leader_basis_{0};
  std::atomic<Clock::rep> link_lost_at_{0};  // since the last CONNECTED; 0: connected
  // Answered requests not yet usable as a basis, oldest first: (sent, answered at).
  std::mutex answered_mu_;
  std::deque<std::pair<Clock::time_point, Clock::time_point>> answered_;  // guarded by answered_mu_
  std::mutex mu_;
  std::condition_variable cv_;  // connected_ / dead_ changes
  std::mutex watch_mu_;
  std::map<std::string, std::vector<std::weak_ptr<WatchSink>>> watchers_;  // guarded by watch_mu_
  std::vector<std::weak_ptr<WatchSink>> all_sinks_;                        // guarded by watch_mu_
  spi::SessionHolds holds_;
  mutable std::mutex own_mu_;
  std::set<std::string> own_;  // guarded by own_mu_
};

// Starts a session (returns at once; wait_connected() to wait). Throws Error(unavailable)
// if the handle cannot be created, Error(invalid_argument) for a connect string the client
// refuses.
std::shared_ptr<Conn> make_conn(const ZkOptions& options, std::uint64_t generation);

}  // namespace dlock::zookeeper
