#include "client.h"

#include <algorithm>

#include "c_client.h"
#include "errors.h"

namespace dlock::zookeeper {

Client::Client(ZkOptions options) : options_(std::move(options)) {
  auto c = conn();
  if (!options_.chroot.empty()) {
    auto r = await(c->exists(options_.chroot));
    if (!r) throw translate_error(options_.where, "checking the chroot", options_.chroot, kTimedOut);
    if (r->rc == ZNONODE) throw missing_chroot();
    if (r->rc != ZOK) throw translate_error(options_.where, "checking the chroot", options_.chroot, r->rc);
  }
  ensure_node(*c, options_.root(), c_client().persistent);
}

Error Client::missing_chroot() const {
  return Error(ErrorCode::invalid_argument,
               options_.where + ": the chroot " + options_.chroot +
                   " does not exist (create it, or drop the path from the URI to use /" + options_.prefix + ")");
}

Clock::duration Client::safe_session_span() const noexcept {
  return zookeeper::safe_session_span(session_timeout());
}

void Client::note_session(const Conn& c) {
  const long long negotiated = c.negotiated_timeout().count();
  if (negotiated <= 0) return;
  // The first grant sets S even above what we asked for (the server's minSessionTimeout):
  // its sessions cannot expire sooner, nor a crashed holder's session later. A later session
  // can only lower it: the hold's expiry estimate must never be later than the server's.
  long long cur = session_ms_.load();
  while ((cur == 0 || negotiated < cur) && !session_ms_.compare_exchange_weak(cur, negotiated)) {
  }
}

std::shared_ptr<Conn> Client::conn() {
  std::shared_ptr<Conn> c;
  {
    std::lock_guard lk(mu_);
    if (!current_ || current_->dead()) current_ = make_conn(options_, ++generation_);
    c = current_;
  }
  if (c->connected()) {
    note_session(*c);
    return c;
  }
  if (!c->wait_connected(Clock::now() + options_.connect_timeout)) {
    throw Error(ErrorCode::unavailable,
                options_.where + ": no ZooKeeper session within connect_timeout (" +
                    std::to_string(options_.connect_timeout.count()) +
                    "ms): no server answers, or the ensemble has no quorum");
  }
  note_session(*c);
  return c;
}

void Client::ensure_node(Conn& c, const std::string& path, int mode) {
  auto r = await(c.create(path, mode));
  if (!r) throw translate_error(options_.where, "creating", path, kTimedOut);
  if (*r == ZOK || *r == ZNODEEXISTS) return;
  // Only the chroot can be missing above our nodes: it was deleted since the open checked it.
  if (*r == ZNONODE && !options_.chroot.empty()) throw missing_chroot();
  throw translate_error(options_.where, "creating", path, *r);
}

}  // namespace dlock::zookeeper
