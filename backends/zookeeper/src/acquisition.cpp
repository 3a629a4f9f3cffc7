#include "acquisition.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "c_client.h"
#include "errors.h"
#include "held_lock.h"
#include "names.h"
#include "testing.h"

namespace dlock::zookeeper {

// What the watch on our predecessor reported, for the next attempt. Filled from the
// driver's thread; every report also wakes the core's wait loop.
class WaiterSink final : public WatchSink {
 public:
  explicit WaiterSink(std::function<void()> wake) : wake_(std::move(wake)) {}

  void node_gone(const std::string& path) noexcept override {
    {
      std::lock_guard lk(mu_);
      gone_.insert(path);
    }
    wake_();
  }
  void watch_failed(const std::string& path) noexcept override {
    {
      std::lock_guard lk(mu_);
      failed_.insert(path);
    }
    wake_();
  }
  void watch_refused(const std::string& path, int rc) noexcept override {
    {
      std::lock_guard lk(mu_);
      refused_.emplace(path, rc);
    }
    wake_();
  }
  void session_ended() noexcept override { wake_(); }

  struct Events {
    std::set<std::string> gone, failed;
    std::map<std::string, int> refused;  // path -> the server's answer
  };
  Events take() {
    std::lock_guard lk(mu_);
    Events e;
    e.gone.swap(gone_);
    e.failed.swap(failed_);
    e.refused.swap(refused_);
    return e;
  }

 private:
  const std::function<void()> wake_;
  std::mutex mu_;
  std::set<std::string> gone_, failed_;  // guarded by mu_
  std::map<std::string, int> refused_;   // guarded by mu_
};

namespace {

std::atomic<std::uint64_t> relists{0};
std::atomic<std::uint64_t> grants_after_relist{0};
std::atomic<std::uint64_t> first_listings{0};

std::string random_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::uint64_t v = rng();
  std::string id(16, '0');
  for (int i = 15; i >= 0; --i) {
    id[static_cast<std::size_t>(i)] = kHex[v & 0xf];
    v >>= 4;
  }
  return id;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

ZkAcquisition::ZkAcquisition(std::shared_ptr<Client> client, const spi::AttemptRequest& request,
                             std::function<void()> wake)
    : client_(std::move(client)),
      req_(request),
      sink_(std::make_shared<WaiterSink>(std::move(wake))),
      parent_(client_->options().root() + "/" + encode_name(request.name)),
      mode_(request.mode == LockMode::exclusive ? 'x' : 's') {}

ZkAcquisition::~ZkAcquisition() {
  // Giving up (or granted with a watch left): take the watch off the server too.
  if (conn_) {
    for (const auto& w : watching_) conn_->unwatch(w, sink_.get(), /*drop_server_watch=*/true);
  }
  if (granted_ || !conn_ || conn_->dead()) return;
  if (!node_.empty()) {
    delete_now_or_later(node_);
  } else if (create_unknown_) {
    find_and_delete(conn_, parent_, id_, nullptr);  // the create may have landed
  }
}

void ZkAcquisition::find_and_delete(std::shared_ptr<Conn> conn, std::string parent, std::string id,
                                    std::shared_ptr<Reply<ChildrenReply>> listing) {
  // Runs on the worker and never blocks it: looks at the listing's answer when it is there,
  // asks again when the answer was a connection loss (the client may still be reconnecting:
  // giving up then would leave our node blocking the name for the session's life).
  if (conn->dead()) return;  // the node, if any, died with the session
  if (!listing) listing = conn->children(parent);
  auto r = listing->wait_until(Clock::now());
  if (!r) {
    post([conn = std::move(conn), parent = std::move(parent), id = std::move(id), listing]() mutable {
           find_and_delete(std::move(conn), std::move(parent), std::move(id), std::move(listing));
         },
         Clock::now() + std::chrono::milliseconds(20));
    return;
  }
  if (is_transport_error(r->rc)) {
    post([conn = std::move(conn), parent = std::move(parent), id = std::move(id)]() mutable {
           find_and_delete(std::move(conn), std::move(parent), std::move(id), nullptr);
         },
         Clock::now() + std::chrono::milliseconds(100));
    return;
  }
  if (r->rc != ZOK) return;  // ZNONODE: no parent, so no node of ours
  for (const auto& child : r->children) {
    auto c = parse_child(child);
    if (c && c->id == id) Conn::guaranteed_delete(conn, parent + "/" + child);
  }
}

std::chrono::milliseconds ZkAcquisition::fallback_poll() const noexcept {
  // Wake-ups come from the watch (or its failure, or the session's end); the poll is a
  // safety net while connected and a quick re-check while the client reconnects.
  if (conn_ && conn_->connected()) return std::chrono::milliseconds(60000);
  return std::chrono::milliseconds(100);
}

void ZkAcquisition::forget_session() {
  // The session expired: our node and watch died with it. Queue again in a new one.
  node_.clear();
  watching_.clear();
  lower_.clear();
  create_unknown_ = false;
  need_list_ = false;
  conn_.reset();
  (void)sink_->take();
}

spi::Attempt ZkAcquisition::attempt() {
  listed_ = false;
  if (conn_ && conn_->dead()) forget_session();
  if (create_unknown_) return recover();
  if (node_.empty()) return enqueue(0);
  if (need_list_) return relist();
  return from_snapshot();
}

void ZkAcquisition::make_parent() {
  // The per-name parent is a container: the server removes it once it has been empty for
  // a while, so 10,000 names used once do not leave 10,000 nodes.
  auto r = client_->await(conn_->create(parent_, c_client().container));
  if (r && *r == ZNONODE) {  // the root itself was deleted under us: make it again
    client_->ensure_node(*conn_, client_->options().root(), c_client().persistent);
    r = client_->await(conn_->create(parent_, c_client().container));
  }
  if (!r) throw translate_error(conn_->where(), "creating", parent_, kTimedOut);
  if (*r != ZOK && *r != ZNODEEXISTS) throw translate_error(conn_->where(), "creating", parent_, *r);
}

spi::Attempt ZkAcquisition::enqueue(int depth) {
  if (!conn_) conn_ = client_->conn();
  id_ = random_id();
  const std::string prefix = node_prefix(parent_, mode_, id_);
  const std::string data(req_.owner_key);
  for (int tries = 0; tries < 4; ++tries) {
    auto c = client_->await(conn_->create_counted(parent_, prefix, data, c_client().ephemeral_sequential));
    if (!c || is_transport_error(c->rc)) {
      create_unknown_ = true;  // it may have landed: the next attempt (or the destructor) looks
      throw translate_error(conn_->where(), "creating a lock node under", parent_, c ? c->rc : kTimedOut);
    }
    if (c->rc == ZNONODE) {  // no container yet, or the server just reaped it
      make_parent();
      continue;
    }
    if (c->rc != ZOK) throw translate_error(conn_->where(), "creating a lock node under", parent_, c->rc);
    node_ = c->path;
    czxid_ = c->czxid;
    conn_->note_own(node_);
    // Every other child existed before ours: with none, nothing is older and the lock is
    // ours (the uncontended case: one request, no listing).
    if (c->siblings == 1) return grant_fresh();
    first_listings.fetch_add(1, std::memory_order_relaxed);
    auto l = client_->await(conn_->children(parent_));
    if (!l || l->rc != ZOK) {
      need_list_ = true;
      throw translate_error(conn_->where(), "listing", parent_, l ? l->rc : kTimedOut);
    }
    return evaluate(l->children, depth);
  }
  throw Error(ErrorCode::unavailable, conn_->where() + ": the container " + parent_ + " keeps disappearing");
}

spi::Attempt ZkAcquisition::recover() {
  auto l = client_->await(conn_->children(parent_));
  if (!l || (l->rc != ZOK && l->rc != ZNONODE)) {
    throw translate_error(conn_->where(), "looking for our node under", parent_, l ? l->rc : kTimedOut);
  }
  create_unknown_ = false;
  for (const auto& child : l->children) {
    auto c = parse_child(child);
    if (!c || c->id != id_) continue;
    const std::string path = parent_ + "/" + child;
    auto s = client_->await(conn_->exists(path));
    if (!s || (s->rc != ZOK && s->rc != ZNONODE)) {
      node_ = path;  // ours for sure: list again next time
      need_list_ = true;
      throw translate_error(conn_->where(), "reading", path, s ? s->rc : kTimedOut);
    }
    if (s->rc == ZNONODE) break;
    node_ = path;
    czxid_ = s->czxid;
    conn_->note_own(node_);
    return evaluate(l->children, 0);
  }
  return enqueue(0);
}

spi::Attempt ZkAcquisition::relist() {
  listed_ = true;
  relists.fetch_add(1, std::memory_order_relaxed);
  auto l = client_->await(conn_->children(parent_));
  if (!l || l->rc != ZOK) throw translate_error(conn_->where(), "listing", parent_, l ? l->rc : kTimedOut);
  need_list_ = false;
  return evaluate(l->children, 0);
}

spi::Attempt ZkAcquisition::evaluate(const std::vector<std::string>& names, int depth) {
  std::vector<Child> children;
  children.reserve(names.size());
  for (const auto& n : names) {
    if (auto c = parse_child(n)) children.push_back(std::move(*c));
  }
  sort_by_sequence(children);
  const std::string mine = base_name(node_);
  auto it = std::find_if(children.begin(), children.end(), [&](const Child& c) { return c.node == mine; });
  if (it == children.end()) {
    // Our node was deleted from outside before we saw it listed: queue again (once).
    conn_->forget_own(node_);
    node_.clear();
    if (depth > 0) throw Error(ErrorCode::unavailable, conn_->where() + ": our lock node under " + parent_ + " keeps vanishing");
    return enqueue(depth + 1);
  }
  lower_.clear();
  for (auto c = children.begin(); c != it; ++c) {
    if (mode_ == 'x' || c->mode == 'x') lower_.push_back(parent_ + "/" + c->node);
  }
  if (lower_.empty()) return grant_fresh();
  if (!req_.will_wait) {
    // Try-once: leave nothing behind.
    delete_now_or_later(node_);
    node_.clear();
    return spi::Busy{};
  }
  watch_nearest();
  return spi::Busy{};
}

spi::Attempt ZkAcquisition::from_snapshot() {
  auto events = sink_->take();
  for (const auto& [path, rc] : events.refused) {
    // Still in our way and unwatchable (its ACL denies us): waiting could only poll.
    if (std::find(lower_.begin(), lower_.end(), path) != lower_.end()) {
      throw translate_error(conn_->where(), "watching the lock node ahead of ours", path, rc);
    }
  }
  bool own_session_node_gone = false;
  bool watched_went = false;
  for (const auto& path : events.gone) {
    if (std::find(lower_.begin(), lower_.end(), path) != lower_.end() && conn_->owns(path)) {
      own_session_node_gone = true;
    }
    std::erase(lower_, path);
    if (std::erase(watching_, path) > 0) watched_went = true;
  }
  for (const auto& path : events.failed) std::erase(watching_, path);  // set again below
  if (lower_.empty()) {
    // Older nodes only ever disappear: with none left we hold the lock, no round trip...
    // ...unless the one that went was our own session's: that may be the session ending
    // (its ephemerals are deleted before we hear of the expiry), and then ours is gone too.
    // Nor when the session's leader_basis() is old (the session's background syncs were
    // not answered lately): the hold's expiry estimate must start from a fresh one. One
    // round trip settles both: our node, and a sync behind it.
    if (own_session_node_gone || basis_is_old()) {
      auto s = conn_->exists(node_);
      auto sync = conn_->sync();
      auto st = client_->await(s);
      if (!st || is_transport_error(st->rc)) {
        throw translate_error(conn_->where(), "checking our lock node", node_, st ? st->rc : kTimedOut);
      }
      if (st->rc == ZNONODE || st->owner != conn_->session_id()) {
        // Our node is gone (our session ended, or someone deleted it): queue again.
        conn_->forget_own(node_);
        node_.clear();
        lower_.clear();
        return conn_->dead() ? spi::Attempt{spi::Busy{}} : enqueue(0);
      }
      auto sy = client_->await(sync);
      if (!sy || *sy != ZOK) {
        throw translate_error(conn_->where(), "syncing with the leader for", node_, sy ? *sy : kTimedOut);
      }
      if (basis_is_old()) {
        // Right after an outage (the server frozen, the client reconnected) the sync cannot
        // move the basis yet: it confirms only requests answered L before it was sent. A
        // grant from the old basis would be lost at once, or soon after (its lost signal
        // fires, and the core deletes our node). The lock is ours and stays ours while we
        // wait, node and place kept: ask again every L/4 (an exists and a sync) until a
        // request answered after the outage is confirmed, then grant from it.
        const auto poll =
            std::chrono::duration_cast<std::chrono::milliseconds>(conn_->leader_lag() / 4);
        return spi::Busy{std::max(poll, std::chrono::milliseconds(10))};
      }
    }
    return grant();
  }
  if (watched_went && !all_watched()) {
    // A watched node went and older ones we do not watch are still in our snapshot. Usually
    // they are long gone (the node that went held the lock after them), but not always: a
    // waiter that gave up or whose session ended leaves older nodes in place. One listing
    // settles them all. With two watches this is the older one going while the nearer one
    // still holds the lock or waits: off the hand-off's path.
    return relist();
  }
  watch_nearest();
  return spi::Busy{};
}

void ZkAcquisition::delete_now_or_later(const std::string& node) noexcept {
  // Waited for (one round trip): until the server has deleted it, our node would still
  // queue ahead of, or make busy, whoever comes next, though we have given up. Past
  // command_timeout the guaranteed delete carries on in the background.
  conn_->forget_own(node);
  try {
    auto r = client_->await(conn_->remove(node));
    if (r && (*r == ZOK || *r == ZNONODE)) return;
  } catch (...) {
  }
  Conn::guaranteed_delete(conn_, node);
}

bool ZkAcquisition::basis_is_old() const {
  return Clock::now() - conn_->leader_basis() > client_->session_timeout() / 2;
}

bool ZkAcquisition::all_watched() const {
  return std::all_of(lower_.begin(), lower_.end(), [&](const std::string& n) {
    return std::find(watching_.begin(), watching_.end(), n) != watching_.end();
  });
}

void ZkAcquisition::watch_nearest() {
  const auto nearest = lower_.end() - static_cast<std::ptrdiff_t>(std::min<std::size_t>(2, lower_.size()));
  // Nodes only leave lower_, so a watched node that is still in it stays among the nearest.
  std::erase_if(watching_, [&](const std::string& w) {
    if (std::find(nearest, lower_.end(), w) != lower_.end()) return false;
    conn_->unwatch(w, sink_.get());  // gone (a listing dropped it): its watch fires anyway
    return true;
  });
  for (auto it = nearest; it != lower_.end(); ++it) {
    if (std::find(watching_.begin(), watching_.end(), *it) != watching_.end()) continue;
    watching_.push_back(*it);
    conn_->watch(*it, sink_);
  }
}

spi::Attempt ZkAcquisition::grant_fresh() {
  // A waiter can wait for a basis that gives the hold time to live; a try-once cannot (it
  // would have to give the lock up), so it is granted from the basis it has.
  if (req_.will_wait && basis_is_old()) return from_snapshot();
  return grant();
}

spi::Attempt ZkAcquisition::grant() {
  for (const auto& w : watching_) conn_->unwatch(w, sink_.get());
  watching_.clear();
  if (listed_) grants_after_relist.fetch_add(1, std::memory_order_relaxed);
  // From the session's leader-confirmed basis (conn.h), not from the request that found the
  // lock free: a listing is a read, which a follower cut off from the leader still answers.
  auto lock = std::make_shared<ZkHeldLock>(std::string(req_.name), req_.mode, std::string(req_.owner_key),
                                           static_cast<std::uint64_t>(czxid_),
                                           conn_->leader_basis() + client_->safe_session_span(), conn_, node_);
  granted_ = true;
  conn_->holds().add(lock);  // marks it lost at once if the session just ended
  return std::shared_ptr<spi::HeldLock>(std::move(lock));
}

testing::WaitCounters testing::wait_counters() {
  return {relists.load(), grants_after_relist.load(), first_listings.load()};
}

}  // namespace dlock::zookeeper
