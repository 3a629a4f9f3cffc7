#include "conn.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "dlock/error.h"
#include "c_client.h"
#include "errors.h"
#include "testing.h"

namespace dlock::zookeeper {
namespace {

// The C client's own log: connection attempts and the like. Errors reach the caller as
// dlock::Error instead, so it is dropped (it would otherwise go to stderr of the app).
void drop_log(const char*) {}

template <class T>
struct Ctx {
  std::shared_ptr<Reply<T>> reply;
  Conn* conn;
  Clock::time_point sent;
};

template <class T>
Ctx<T>* new_ctx(Conn* c, const std::shared_ptr<Reply<T>>& r) {
  return new Ctx<T>{r, c, Clock::now()};
}

template <class T>
std::unique_ptr<Ctx<T>> take(const void* data) {
  return std::unique_ptr<Ctx<T>>(static_cast<Ctx<T>*>(const_cast<void*>(data)));
}

// A server answer (any rc other than a transport failure): a candidate basis, once a later
// request the leader processed confirms it (Conn::leader_basis).
template <class Context>  // any request context with `conn` and `sent`
void note_answer(Context& ctx, int rc) {
  if (!is_transport_error(rc)) ctx.conn->answered(ctx.sent);
}

// A request the leader processed (a write, a sync), answered: OK proves the leader had it.
template <class Context>
void note_leader_answer(Context& ctx, int rc) {
  if (rc == ZOK) ctx.conn->confirm(ctx.sent);
}

// Every completion below runs under the client's lock (driver.h): it copies what it needs
// out of the client's buffers and reports; the report sets the reply.
template <class Context, class T>  // any request context with `conn`, `sent` and `reply`
void answer(Context& ctx, int rc, T value) {
  note_answer(ctx, rc);
  ctx.conn->report([reply = std::move(ctx.reply), value = std::move(value)]() mutable { reply->set(std::move(value)); });
}

void on_created(int rc, const char*, const void* data) {
  auto ctx = take<int>(data);
  note_leader_answer(*ctx, rc);
  answer(*ctx, rc, rc);
}

void on_sync(int rc, const char*, const void* data) {
  auto ctx = take<int>(data);
  note_leader_answer(*ctx, rc);
  answer(*ctx, rc, rc);
}

// The create-and-count transaction (Conn::create_counted): its operations and the buffers
// the client fills with their results live until the completion.
struct CountedCtx {
  std::shared_ptr<Reply<CountedCreateReply>> reply;
  Conn* conn;
  Clock::time_point sent;
  std::vector<char> path;  // the created node's name, written by the client
  Stat parent{};           // the parent's stat after the transaction
  zoo_op_t ops[2];
  zoo_op_result_t results[2];
};

void on_counted(int rc, const void* data) {
  std::unique_ptr<CountedCtx> ctx(static_cast<CountedCtx*>(const_cast<void*>(data)));
  CountedCreateReply r;
  r.rc = rc;
  if (rc == ZOK) {
    r.path = ctx->path.data();
    r.czxid = ctx->parent.mzxid;
    r.siblings = ctx->parent.numChildren;
  }
  note_leader_answer(*ctx, rc);
  answer(*ctx, rc, std::move(r));
}

void on_children(int rc, const String_vector* strings, const void* data) {
  auto ctx = take<ChildrenReply>(data);
  ChildrenReply r;
  r.rc = rc;
  if (rc == ZOK && strings != nullptr) {
    r.children.reserve(static_cast<std::size_t>(strings->count));
    for (int i = 0; i < strings->count; ++i) r.children.emplace_back(strings->data[i]);
  }
  answer(*ctx, rc, std::move(r));
}

void on_deleted(int rc, const void* data) {
  auto ctx = take<int>(data);
  note_leader_answer(*ctx, rc);
  answer(*ctx, rc, rc);
}

void on_stat(int rc, const Stat* stat, const void* data) {
  auto ctx = take<StatReply>(data);
  StatReply r;
  r.rc = rc;
  if (rc == ZOK && stat != nullptr) {
    r.czxid = stat->czxid;
    r.owner = stat->ephemeralOwner;
  }
  answer(*ctx, rc, r);
}

void on_auth(int, const void*) {}

// testing.h: every Conn that ever connected, until it is destroyed.
std::mutex g_live_mu;
std::map<const Conn*, std::pair<std::string, testing::LiveSession>> g_live;  // root, session

// testing.h: set_pause_after_session_start, in ms.
std::atomic<long long> g_start_pause_ms{0};

struct WatchCtx {
  Conn* conn;
  std::string path;
  std::weak_ptr<WatchSink> sink;
  Clock::time_point sent;
};

// What the answer to a watch request means for its sink (a report: no client lock held).
void watch_set(const WatchCtx& ctx, int rc) {
  if (rc == ZOK) {  // the watch is set: the event will come, if anyone still wants it
    ctx.conn->drop_if_unwatched(ctx.path);
    return;
  }
  auto sink = ctx.sink.lock();
  if (!sink) return;
  ctx.conn->unwatch(ctx.path, sink.get());
  if (rc == ZNONODE) {
    sink->node_gone(ctx.path);
  } else if (is_transport_error(rc)) {
    sink->watch_failed(ctx.path);
  } else {
    sink->watch_refused(ctx.path, rc);  // the same request would get the same answer
  }
}

void on_watch_set(int rc, const char*, int, const Stat*, const void* data) {
  std::shared_ptr<WatchCtx> ctx(static_cast<WatchCtx*>(const_cast<void*>(data)));
  note_answer(*ctx, rc);
  ctx->conn->report([ctx, rc] { watch_set(*ctx, rc); });
}

}  // namespace

Conn::Conn(const ZkOptions& o, std::uint64_t generation)
    : generation_(generation),
      authenticated_(!o.user.empty()),
      hosts_(o.hosts),
      root_(o.root()),
      where_(o.where) {
  const CClient& zk = c_client();
  const int timeout_ms = static_cast<int>(o.session_timeout.count());
  // The leader creates the session after this: it cannot expire it before now + S.
  leader_basis_ = Clock::now().time_since_epoch().count();
  // The driver first: the callbacks reach it through driver_, and the single-threaded client
  // calls them only from zookeeper_process, which the driver's thread runs once started.
  driver_ = std::make_unique<Driver>();
  errno = 0;
  zhandle_t* zh = zk.init(o.hosts.c_str(), &Conn::global_watcher, timeout_ms, nullptr, this, 0, &drop_log);
  if (zh == nullptr) {
    const int err = errno;
    if (err == EINVAL) {
      throw Error(ErrorCode::invalid_argument, where_ + ": the client refused the host list (" +
                                                   std::strerror(err) + ")");
    }
    throw Error(ErrorCode::unavailable,
                where_ + ": cannot start a session (" + std::strerror(err) + ", e.g. a host that does not resolve)");
  }
  // By default the client resolves the host list again each time it polls its socket,
  // i.e. around every request: getaddrinfo (reading /etc/hosts, a netlink socket for
  // AI_ADDRCONFIG) on every lock operation, most of the client's CPU under load. It still
  // resolves after a connection loss; routine re-resolution once a minute is plenty.
  zk.set_servers_resolution_delay(zh, 60000);
  if (authenticated_) {
    const std::string cert = o.user + ":" + *o.password;
    zk.add_auth(zh, "digest", cert.data(), static_cast<int>(cert.size()), &on_auth, nullptr);
  }
  driver_->start(zh);  // no thread: ~Driver closes the handle (nothing was sent on it yet)
  if (const long long ms = g_start_pause_ms.load(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

Conn::~Conn() {
  {
    std::lock_guard lk(g_live_mu);
    g_live.erase(this);
  }
  // First: the reports of what close completes still reach this Conn's members.
  driver_->close();
}

void Conn::report(Driver::Report r) { driver_->report(std::move(r)); }

void Conn::register_live(zhandle_t* zh) noexcept {
  try {
    const clientid_t* id = c_client().client_id(zh);
    testing::LiveSession s;
    s.hosts = hosts_;
    s.id = id->client_id;
    std::copy(std::begin(id->passwd), std::end(id->passwd), s.password.begin());
    std::lock_guard lk(g_live_mu);
    g_live[this] = {root_, s};
  } catch (...) {
  }
}

std::vector<testing::LiveSession> testing::sessions_under(const std::string& root) {
  std::vector<LiveSession> out;
  std::lock_guard lk(g_live_mu);
  for (const auto& [conn, entry] : g_live) {
    if (entry.first != root) continue;
    out.push_back(entry.second);
    out.back().dead = conn->dead();
  }
  return out;
}

void testing::set_pause_after_session_start(std::chrono::milliseconds pause) { g_start_pause_ms = pause.count(); }

std::shared_ptr<Conn> make_conn(const ZkOptions& options, std::uint64_t generation) {
  auto c = std::shared_ptr<Conn>(new Conn(options, generation), [](Conn* p) { post([p] { delete p; }); });
  Conn::keep_alive(c, Clock::now());
  return c;
}

bool Conn::wait_connected(Clock::time_point deadline) {
  std::unique_lock lk(mu_);
  cv_.wait_until(lk, deadline, [&] { return connected_.load() || dead_.load(); });
  return connected_.load() && !dead_.load();
}

std::int64_t Conn::session_id() const {
  return driver_->read(
      [](zhandle_t* zh) {
        const clientid_t* id = c_client().client_id(zh);
        return id != nullptr ? static_cast<std::int64_t>(id->client_id) : std::int64_t{0};
      },
      std::int64_t{0});
}

Clock::duration Conn::leader_lag() const noexcept {
  const int s = negotiated_ms_.load();
  if (s <= 0) return std::chrono::hours(1);  // not connected yet: nothing was answered
  return std::chrono::milliseconds(s / 4 + 20);
}

void Conn::answered(Clock::time_point sent) noexcept {
  const auto now = Clock::now();
  std::lock_guard lk(answered_mu_);
  // One answer per L/16 is kept (the list stays short under load): a basis at most that
  // much older. Not merged into the last one: an answer time that kept moving on under a
  // steady stream of answers would never become old enough to be confirmed.
  if (!answered_.empty() && now - answered_.back().second < leader_lag() / 16) return;
  if (answered_.size() >= 256) answered_.pop_front();  // only ever loses an older basis
  answered_.emplace_back(sent, now);
}

void Conn::confirm(Clock::time_point sent) noexcept {
  const auto cutoff = sent - leader_lag();
  Clock::time_point basis{};
  {
    std::lock_guard lk(answered_mu_);
    while (!answered_.empty() && answered_.front().second <= cutoff) {
      basis = std::max(basis, answered_.front().first);
      answered_.pop_front();
    }
  }
  advance_basis(basis.time_since_epoch().count());
}

void Conn::advance_basis(Clock::rep v) noexcept {
  auto cur = leader_basis_.load();
  while (cur < v && !leader_basis_.compare_exchange_weak(cur, v)) {
  }
  if (cur >= v) return;
  // Every hold of the session follows at once, not only at the core's next probe (S/3
  // apart): the basis lags the present by L or more, and the holds should not lag it by
  // S/3 on top of that. With this session's S.
  const auto s = std::chrono::milliseconds(negotiated_ms_.load());
  if (s.count() > 0) holds_.refresh(Clock::time_point(Clock::duration(v)) + safe_session_span(s));
}

void Conn::keep_alive(std::weak_ptr<Conn> conn, Clock::time_point due) {
  post([conn = std::move(conn), due]() mutable {
         // Run before its time only once the process is exiting (worker.h): stop then.
         if (Clock::now() < due) return;
         auto c = conn.lock();
         if (!c || c->dead()) return;
         auto period = std::chrono::milliseconds(100);  // until the session is connected
         if (c->connected()) {
           (void)c->sync();  // its answer advances leader_basis()
           period = c->negotiated_timeout() / 6;
         }
         c.reset();  // the last owner may be us: the Conn is then deleted by the worker
         keep_alive(std::move(conn), Clock::now() + period);
       },
       due);
}

void Conn::note_own(const std::string& path) {
  std::lock_guard lk(own_mu_);
  own_.insert(path);
}

void Conn::forget_own(const std::string& path) noexcept {
  std::lock_guard lk(own_mu_);
  own_.erase(path);
}

bool Conn::owns(const std::string& path) const {
  std::lock_guard lk(own_mu_);
  return own_.contains(path);
}

const ACL_vector* Conn::acl() const noexcept {
  return authenticated_ ? c_client().creator_all_acl : c_client().open_acl_unsafe;
}

std::shared_ptr<Reply<int>> Conn::create(const std::string& path, int mode) {
  auto r = std::make_shared<Reply<int>>();
  auto* ctx = new_ctx(this, r);
  const int rc = driver_->call(
      [&](zhandle_t* zh) { return c_client().acreate(zh, path.c_str(), "", 0, acl(), mode, &on_created, ctx); });
  if (rc != ZOK) {
    delete ctx;
    r->set(rc);
  }
  return r;
}

std::shared_ptr<Reply<CountedCreateReply>> Conn::create_counted(const std::string& parent, const std::string& path,
                                                                const std::string& data, int mode) {
  auto r = std::make_shared<Reply<CountedCreateReply>>();
  auto ctx = std::make_unique<CountedCtx>();
  ctx->reply = r;
  ctx->conn = this;
  ctx->path.assign(path.size() + 32, '\0');  // room for the sequence suffix
  const CClient& zk = c_client();
  zk.create_op_init(&ctx->ops[0], path.c_str(), data.data(), static_cast<int>(data.size()), acl(), mode,
                    ctx->path.data(), static_cast<int>(ctx->path.size()));
  zk.set_op_init(&ctx->ops[1], parent.c_str(), "", 0, -1, &ctx->parent);
  ctx->sent = Clock::now();
  const int rc =
      driver_->call([&](zhandle_t* zh) { return zk.amulti(zh, 2, ctx->ops, ctx->results, &on_counted, ctx.get()); });
  if (rc != ZOK) {
    r->set(CountedCreateReply{rc, {}, 0, 0});
  } else {
    (void)ctx.release();  // on_counted owns it now
  }
  return r;
}

std::shared_ptr<Reply<ChildrenReply>> Conn::children(const std::string& path) {
  auto r = std::make_shared<Reply<ChildrenReply>>();
  auto* ctx = new_ctx(this, r);
  const int rc =
      driver_->call([&](zhandle_t* zh) { return c_client().aget_children(zh, path.c_str(), 0, &on_children, ctx); });
  if (rc != ZOK) {
    delete ctx;
    r->set(ChildrenReply{rc, {}});
  }
  return r;
}

std::shared_ptr<Reply<int>> Conn::remove(const std::string& path) {
  auto r = std::make_shared<Reply<int>>();
  auto* ctx = new_ctx(this, r);
  const int rc =
      driver_->call([&](zhandle_t* zh) { return c_client().adelete(zh, path.c_str(), -1, &on_deleted, ctx); });
  if (rc != ZOK) {
    delete ctx;
    r->set(rc);
  }
  return r;
}

std::shared_ptr<Reply<StatReply>> Conn::exists(const std::string& path) {
  auto r = std::make_shared<Reply<StatReply>>();
  auto* ctx = new_ctx(this, r);
  const int rc = driver_->call([&](zhandle_t* zh) { return c_client().aexists(zh, path.c_str(), 0, &on_stat, ctx); });
  if (rc != ZOK) {
    delete ctx;
    r->set(StatReply{rc, 0, 0});
  }
  return r;
}

std::shared_ptr<Reply<int>> Conn::sync() {
  auto r = std::make_shared<Reply<int>>();
  auto* ctx = new_ctx(this, r);
  const int rc = driver_->call([&](zhandle_t* zh) { return c_client().async(zh, "/", &on_sync, ctx); });
  if (rc != ZOK) {
    delete ctx;
    r->set(rc);
  }
  return r;
}

void Conn::watch(const std::string& path, const std::shared_ptr<WatchSink>& sink) {
  int rc = ZOK;
  {
    // Registered before the request goes out, so an event racing the answer is not missed;
    // sent under the lock, so it is ordered after any removal of the same path's watch.
    std::lock_guard lk(watch_mu_);
    auto& list = watchers_[path];
    std::erase_if(list, [](const auto& w) { return w.expired(); });
    list.push_back(sink);
    auto* ctx = new WatchCtx{this, path, sink, Clock::now()};
    rc = driver_->call([&](zhandle_t* zh) {
      return c_client().awget(zh, path.c_str(), &Conn::node_watcher, this, &on_watch_set, ctx);
    });
    if (rc != ZOK) delete ctx;
  }
  if (rc != ZOK) {
    unwatch(path, sink.get());
    if (is_transport_error(rc)) {
      sink->watch_failed(path);
    } else {
      sink->watch_refused(path, rc);
    }
  }
}

void Conn::unwatch(const std::string& path, const WatchSink* sink, bool drop_server_watch) noexcept {
  std::lock_guard lk(watch_mu_);
  auto it = watchers_.find(path);
  if (it == watchers_.end()) return;
  std::erase_if(it->second, [&](const auto& w) {
    auto s = w.lock();
    return !s || s.get() == sink;
  });
  if (!it->second.empty()) return;
  watchers_.erase(it);
  if (drop_server_watch) remove_server_watch_locked(path);
}

void Conn::drop_if_unwatched(const std::string& path) noexcept {
  std::lock_guard lk(watch_mu_);
  auto it = watchers_.find(path);
  if (it != watchers_.end()) {
    std::erase_if(it->second, [](const auto& w) { return w.expired(); });
    if (!it->second.empty()) return;
    watchers_.erase(it);
  }
  remove_server_watch_locked(path);
}

void Conn::remove_server_watch_locked(const std::string& path) noexcept {
  // All our node watches share one (function, context) pair, so the client keeps one entry
  // per path and the server one watch per path and session: remove it only when no sink of
  // ours is left on the path (the callers check, under watch_mu_). Only "remove all" takes
  // a watch off the server: removing one watcher only checks the server still has it. The
  // client answers ZNOWATCHER itself, with no request, when the watch already fired. A
  // removal lost to a connection loss leaves the watch until its node goes, as before.
  // The header types the completion as a pointer to a void_completion_t; the client stores
  // and calls it as the function pointer itself.
  static const void_completion_t ignore = [](int, const void*) {};
  driver_->call([&](zhandle_t* zh) {
    return c_client().aremove_all_watches(zh, path.c_str(), ZWATCHTYPE_DATA, 0,
                                          reinterpret_cast<void_completion_t*>(reinterpret_cast<void*>(ignore)),
                                          nullptr);
  });
}

void Conn::notify_path(const std::string& path, bool gone) {
  std::vector<std::weak_ptr<WatchSink>> sinks;
  {
    std::lock_guard lk(watch_mu_);
    auto it = watchers_.find(path);
    if (it == watchers_.end()) return;
    sinks = std::move(it->second);
    watchers_.erase(it);
  }
  for (auto& w : sinks) {
    if (auto s = w.lock()) {
      if (gone) {
        s->node_gone(path);
      } else {
        s->watch_failed(path);
      }
    }
  }
}

void Conn::node_watcher(zhandle_t*, int type, int, const char* path, void* ctx) {
  // Per-node watchers also hear every session event (the C client's
  // collect_session_watchers): those are handled by the global watcher alone.
  const CClient& zk = c_client();
  if (type == zk.session_event || path == nullptr) return;
  auto* self = static_cast<Conn*>(ctx);
  self->report([self, p = std::string(path), gone = type == zk.deleted_event] { self->notify_path(p, gone); });
}

void Conn::global_watcher(zhandle_t* zh, int type, int state, const char*, void* ctx) {
  const CClient& zk = c_client();
  if (type != zk.session_event) return;
  auto* self = static_cast<Conn*>(ctx);
  if (state == zk.connected_state) {
    // Read here, under the client's lock (the socket is marked close-on-exec by the driver).
    self->negotiated_ms_ = zk.recv_timeout(zh);
    self->register_live(zh);
    // Connected again within the session: the member asked the leader to revalidate it
    // (the leader touches it) before answering, after we lost the link, after every
    // answer we had before.
    if (const auto lost = self->link_lost_at_.exchange(0); lost != 0) self->advance_basis(lost);
  } else if (state != zk.expired_session_state && state != zk.auth_failed_state) {
    // Before the client tries any member again (it does so after this event).
    Clock::rep none = 0;
    self->link_lost_at_.compare_exchange_strong(none, Clock::now().time_since_epoch().count());
  }
  self->report([self, state] { self->on_session_state(state); });
}

void Conn::on_session_state(int state) {
  const CClient& zk = c_client();
  if (state == zk.connected_state) {
    {
      std::lock_guard lk(mu_);
      connected_ = true;
    }
    cv_.notify_all();
  } else if (state == zk.expired_session_state || state == zk.auth_failed_state) {
    expire();
  } else {
    // CONNECTING / ASSOCIATING: the client moves to another member within the session.
    // Holds stay: their S-based expiry estimate decides (the probes stop being answered).
    std::lock_guard lk(mu_);
    connected_ = false;
  }
}

void Conn::expire() {
  {
    std::lock_guard lk(mu_);
    if (dead_.exchange(true)) return;
    connected_ = false;
  }
  cv_.notify_all();
  // No NODE_DELETED arrives for our own nodes after an expiry: the session event is the
  // only signal, so it drives the fan-out.
  holds_.mark_all_lost();
  std::map<std::string, std::vector<std::weak_ptr<WatchSink>>> all;
  {
    std::lock_guard lk(watch_mu_);
    all.swap(watchers_);
  }
  for (auto& [path, sinks] : all) {
    for (auto& w : sinks) {
      if (auto s = w.lock()) s->session_ended();
    }
  }
}

namespace {

struct DeleteCtx {
  std::shared_ptr<Conn> conn;  // keeps the session open until the delete is settled
  std::string path;
  Clock::time_point sent;
};

void settle_delete(DeleteCtx& ctx, int rc) {
  if (rc == ZOK || rc == ZNONODE || !is_transport_error(rc) || ctx.conn->dead()) return;
  // Not settled (connection lost, timeout): again a little later, from the worker.
  post([conn = std::move(ctx.conn), path = std::move(ctx.path)]() mutable {
         Conn::guaranteed_delete(std::move(conn), std::move(path));
       },
       Clock::now() + std::chrono::milliseconds(100));
}

void on_guaranteed_delete(int rc, const void* data) {
  std::shared_ptr<DeleteCtx> ctx(static_cast<DeleteCtx*>(const_cast<void*>(data)));
  note_leader_answer(*ctx, rc);
  note_answer(*ctx, rc);
  // The report owns the context: the session it keeps open is let go outside the lock.
  Conn* conn = ctx->conn.get();
  conn->report([ctx = std::move(ctx), rc] { settle_delete(*ctx, rc); });
}

}  // namespace

void Conn::guaranteed_delete(std::shared_ptr<Conn> conn, std::string path) {
  if (!conn || conn->dead()) return;  // the node died with its session
  conn->forget_own(path);
  Driver& driver = *conn->driver_;
  auto* ctx = new DeleteCtx{std::move(conn), std::move(path), Clock::now()};
  const int rc = driver.call(
      [&](zhandle_t* zh) { return c_client().adelete(zh, ctx->path.c_str(), -1, &on_guaranteed_delete, ctx); });
  if (rc != ZOK) delete ctx;  // ZINVALIDSTATE: the handle is dead, and the node with it
}

}  // namespace dlock::zookeeper
