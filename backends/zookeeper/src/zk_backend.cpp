#include "zk_backend.h"

#include <map>

#include "acquisition.h"
#include "errors.h"
#include "held_lock.h"
#include "names.h"

namespace dlock::zookeeper {

ZkBackend::ZkBackend(ZkOptions options) : client_(std::make_shared<Client>(std::move(options))) {
  caps_.reentrant = true;  // in the core
  caps_.read_write = true;
  caps_.fair = true;  // the node order is FIFO for everyone
  caps_.fencing = true;
  caps_.push_wakeup = true;
  caps_.liveness = Liveness::session;
  caps_.max_name_bytes = kMaxNameBytes;
  const auto s = client_->session_timeout();
  caps_.default_lease = s;
  caps_.lost_signal_bound = s;
  // The server expires a session at the first tick after S without a word from it, so a
  // crashed holder's node can stay up to S + one tick; a tick is at most S/2 (ZooKeeper
  // grants no session shorter than two ticks unless minSessionTimeout was lowered).
  caps_.crash_release_bound = s + s / 2;
}

std::unique_ptr<spi::Acquisition> ZkBackend::begin_acquire(const spi::AttemptRequest& request,
                                                           std::function<void()> wake) {
  return std::make_unique<ZkAcquisition>(client_, request, std::move(wake));
}

bool ZkBackend::release(spi::HeldLock& lock) {
  auto& zl = static_cast<ZkHeldLock&>(lock);
  const auto& conn = zl.conn();
  const auto settle = [&] {
    const bool first = zl.settle();
    conn->holds().remove(zl);
    conn->unwatch(zl.path(), &zl);
    conn->forget_own(zl.path());
    return first;
  };
  if (conn->dead()) {
    settle();
    return false;  // the node died with its session
  }
  const bool retry = zl.begin_release();
  conn->forget_own(zl.path());  // a waiter of this session may take its deletion as a hand-off
  auto r = client_->await(conn->remove(zl.path()));
  if (r && *r == ZSESSIONEXPIRED) {
    // The server's definitive answer (the client hands it to requests it still had when it
    // heard, before the expiry event runs): the node died with the session.
    settle();
    return false;
  }
  if (!r || is_transport_error(*r)) {
    if (zl.lost()) {
      // A hold already given up (the core releases it after the lost signal, and nobody
      // will call again): keep deleting in the background, so a session that survived
      // does not keep the name blocked for the provider's life.
      settle();
      Conn::guaranteed_delete(conn, zl.path());
    } else {
      // The hold stays (the core keeps it, and release() may be called again): still
      // probed, still marked lost if the session ends. Giving it up here would make the
      // next release() answer false at once while the node may still hold the lock.
      conn->note_own(zl.path());
    }
    throw translate_error(conn->where(), "deleting", zl.path(), r ? *r : kTimedOut);
  }
  settle();
  if (*r == ZOK) return true;
  if (*r == ZNONODE) {
    // After an unconfirmed earlier attempt, that attempt's delete may have removed it.
    return retry && !conn->dead();
  }
  throw translate_error(conn->where(), "deleting", zl.path(), *r);
}

void ZkBackend::extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds,
                            std::span<spi::RenewStatus> out) noexcept {
  // One sync per session: answered only once the leader processed it, so an answer
  // advances the session's leader_basis() (conn.h), from which every hold's expiry is set.
  std::map<Conn*, std::shared_ptr<Reply<int>>> probes;
  for (std::size_t i = 0; i < locks.size(); ++i) {
    auto* zl = static_cast<ZkHeldLock*>(locks[i]);
    const auto& conn = zl->conn();
    if (conn->dead() || zl->lost() || zl->settled()) {
      out[i] = spi::RenewStatus::not_held;
      continue;
    }
    out[i] = spi::RenewStatus::failed;
    try {
      if (!probes.contains(conn.get())) probes.emplace(conn.get(), conn->sync());
      if (zl->start_watching()) conn->watch(zl->path(), zl->shared_from_this());
    } catch (...) {
      // out of memory: stays failed
    }
  }
  std::map<Conn*, bool> answered;
  for (auto& [conn, probe] : probes) {
    auto r = client_->await(probe);
    answered[conn] = r && *r == ZOK;
  }
  const auto span = client_->safe_session_span();
  for (std::size_t i = 0; i < locks.size(); ++i) {
    if (out[i] == spi::RenewStatus::not_held) continue;
    auto* zl = static_cast<ZkHeldLock*>(locks[i]);
    auto it = answered.find(zl->conn().get());
    if (it == answered.end() || !it->second) continue;
    if (zl->lost()) {  // its node was deleted from outside (the watch said so)
      out[i] = spi::RenewStatus::not_held;
      continue;
    }
    // Never earlier than the estimate it has (that one was safe too).
    const auto expiry = zl->conn()->leader_basis() + span;
    if (expiry > zl->server_expiry()) zl->set_server_expiry(expiry);
    out[i] = spi::RenewStatus::renewed;
  }
}

}  // namespace dlock::zookeeper
