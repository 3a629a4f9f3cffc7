// ZkAcquisition: one acquire call on the zookeeper backend (brief §4.a).
//
// The first attempt creates our ephemeral-sequential node in a transaction that also counts
// the container's children (Conn::create_counted): alone, we hold the lock after that one
// request; otherwise one listing follows (every other child is older than ours). We hold the
// lock when no relevant node is older than ours (exclusive: any; shared: an exclusive one).
// Otherwise we watch the two youngest relevant older nodes with data watches (so a node has
// at most two watchers: no herd) and keep the snapshot: older nodes can only disappear, so
// when the last of them goes we are granted with no round trip. The second watch keeps the
// snapshot exact: when the older of the two goes (usually: it held the lock, and the nearer
// one holds it now), one listing drops the nodes that went unseen before it, while the
// nearer one still holds the lock, off the hand-off's path. The node is our queue place
// between attempts; the destructor deletes it (guaranteed delete) unless an attempt returned
// a grant.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client.h"
#include "dlock/spi/backend.h"

namespace dlock::zookeeper {

class WaiterSink;

class ZkAcquisition final : public spi::Acquisition {
 public:
  ZkAcquisition(std::shared_ptr<Client> client, const spi::AttemptRequest& request,
                std::function<void()> wake);
  ~ZkAcquisition() override;

  spi::Attempt attempt() override;
  std::chrono::milliseconds fallback_poll() const noexcept override;

 private:
  spi::Attempt enqueue(int depth);
  spi::Attempt recover();
  spi::Attempt relist();
  spi::Attempt evaluate(const std::vector<std::string>& children, int depth);
  spi::Attempt from_snapshot();
  // Our node is first (no relevant older node): grant(), unless this acquire waits and
  // basis_is_old(), which from_snapshot() settles first (a sync; Busy until it is fresh).
  spi::Attempt grant_fresh();
  spi::Attempt grant();
  void make_parent();
  // Watches the two youngest nodes of lower_ (drops watches on nodes no longer in it).
  void watch_nearest();
  bool all_watched() const;
  // The session's leader_basis() is more than S/2 old: a hold granted from it would have
  // less than S/2 to live (its lost signal due within S/2) unless the basis advances.
  bool basis_is_old() const;
  void delete_now_or_later(const std::string& node) noexcept;
  void forget_session();
  // After a create whose answer never came: finds the node by our id and deletes it, in
  // the background, retrying until the server answers or the session is dead.
  static void find_and_delete(std::shared_ptr<Conn> conn, std::string parent, std::string id,
                              std::shared_ptr<Reply<ChildrenReply>> listing);

  std::shared_ptr<Client> client_;
  const spi::AttemptRequest& req_;
  std::shared_ptr<WaiterSink> sink_;
  const std::string parent_;
  const char mode_;
  std::shared_ptr<Conn> conn_;      // the session our node lives in
  std::string id_;                  // 16 hex digits, in our node's name
  std::string node_;                // our node's full path; empty: none (yet)
  std::int64_t czxid_ = 0;
  bool create_unknown_ = false;     // a create went out and its answer never came
  bool need_list_ = false;          // our node exists but the listing failed
  std::vector<std::string> lower_;  // the older relevant nodes (full paths), oldest first
  std::vector<std::string> watching_;  // the nodes our watches are on (at most two)
  bool granted_ = false;
  bool listed_ = false;  // this attempt listed the children after a watch event
};

}  // namespace dlock::zookeeper
