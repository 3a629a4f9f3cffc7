// One acquire call in row mode: a try-once acquire is one NOWAIT attempt on a short
// connection; one that may wait queues at once in InnoDB's queue (a server-side blocking wait
// on a waiter connection, run by a parked waiter thread: Connector/C++ is synchronous). A
// grant from the wait is picked up by the next attempt() with no round trip. A wait that
// failed (a lost connection) is followed by a NOWAIT attempt, which reports errors, and a
// new wait.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "dlock/spi/backend.h"
#include "dlock/support/unique_fd.h"
#include "row_backend.h"

namespace dlock::mysql {

// The state a waiter thread shares with its acquisition (and outlives it if need be).
struct WaitState {
  enum class Phase { connecting, waiting, granted, consumed, failed, done };
  std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::connecting;  // guarded by mu
  bool abandoned = false;           // guarded by mu: the acquisition is gone
  bool finished = false;            // guarded by mu: the thread has returned
  std::shared_ptr<Connection> conn; // guarded by mu
  std::uint64_t conn_id = 0;        // guarded by mu: for KILL QUERY
  // guarded by mu: our own reference to conn's socket (taken before the wait's statement, so
  // never another socket that got its fd number after Connector/C closed it), shut down if
  // KILL fails; closed when the thread lets go of the connection (answered).
  support::UniqueFd socket;
  // guarded by mu: the wait's statement has returned (or the connection is given up): no
  // more KILL QUERY, and no deadline is armed on the socket any more.
  bool answered = false;
  std::uint64_t kill_bound = 0;     // guarded by mu: the give-up's deadline on `socket`
  std::uint64_t token = 0;
  std::chrono::steady_clock::time_point sent;  // the expiry estimate starts here
  std::function<void()> wake;       // called under mu, never after abandoned is set
};

class RowAcquisition final : public spi::Acquisition {
 public:
  RowAcquisition(std::shared_ptr<Shared> shared, const spi::AttemptRequest& request,
                 std::function<void()> wake);
  // Abandons a wait: KILL QUERY of the waiter connection is sent (and repeated until the
  // wait ends) from a background thread, and this waits (at most command_timeout) until the
  // wait has ended on the server. A grant that raced with the give-up is undone before this
  // returns, by a ROLLBACK on its connection (one round trip, within command_timeout; if that
  // fails, the connection is closed on the same thread): here when the grant had already
  // arrived, else by the waiter thread while this waits for it. So when the acquire returns
  // "not acquired", the row is already free for a try-once of another owner.
  ~RowAcquisition() override;

  spi::Attempt attempt() override;
  std::chrono::milliseconds fallback_poll() const noexcept override;

 private:
  // One NOWAIT attempt on a short connection (creating the row first if it is missing).
  spi::Attempt try_now();
  void start_wait();

  std::shared_ptr<Shared> shared_;
  const spi::AttemptRequest& request_;
  std::function<void()> wake_;
  const std::string key_hex_;
  const std::string lock_sql_;  // the prepared NOWAIT statement's text
  std::shared_ptr<WaitState> wait_;
  bool tried_ = false;  // an attempt (NOWAIT or queued) was made
};

}  // namespace dlock::mysql
