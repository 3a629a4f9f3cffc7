// Clean-up of lease rows that an acquire may have taken without our knowing (mode=lease):
// its batch was sent and no answer came, and the server runs a batch already in its socket
// once it answers again, even after the client closed the connection. The row is then taken
// by an owner key nobody releases or renews, for a whole lease.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lease_sql.h"
#include "options.h"
#include "pool.h"

namespace dlock::mysql {

// An acquire never granted to its caller whose batch was sent on `sessions` without an
// answer. Its owner key is used by no other acquire (spi::AttemptRequest::owner_key), so
// an owner-checked clear touches nothing but what the lost batch took.
struct LostAcquire {
  std::string key_hex, owner_hex;
  std::vector<SessionRef> sessions;
  std::chrono::milliseconds lease{0};
};

// Runs each queued clear on a thread of its own (started by the first one). The clear is
// ordered after the lost batch whatever the server's threads do: it runs only once the
// server lists none of the sessions it was sent on (lease_clear_lost_batch); a new
// connection's statement could overtake the lost one otherwise. Retried after 50 ms,
// doubling up to 1 s, while the server cannot be reached, does not answer or still lists a
// session; given up once `lease` has passed since then (or since it was queued) with only
// refusals (a server error): a lease taken before then has run out by itself.
// Thread safety: queue() may be called concurrently.
class LeaseCleaner {
 public:
  // `pool` gives the connections and must outlive the cleaner.
  LeaseCleaner(const MysqlOptions& options, Pool& pool) : options_(options), pool_(pool) {}
  // Stops the thread; a clear under way finishes first (bounded by the pool's slot wait,
  // connect_timeout and command_timeout). Clears not done are dropped: their rows run out.
  ~LeaseCleaner();
  LeaseCleaner(const LeaseCleaner&) = delete;
  LeaseCleaner& operator=(const LeaseCleaner&) = delete;

  // Queues the clear of `lost`'s row; runs it at once if the thread is idle. Drops it if no
  // thread can be started (the row then runs out at its lease).
  void queue(LostAcquire lost) noexcept;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    LostAcquire lost;
    Clock::time_point next_try, give_up;
    std::chrono::milliseconds backoff{0};
  };
  // One try: true once done (the clear ran: cleared, or the row was not the lost owner's),
  // false while the server still lists a session. Throws when the server did not answer.
  bool try_clear(const LostAcquire& lost);
  void loop() noexcept;

  const MysqlOptions& options_;
  Pool& pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> entries_;  // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::thread thread_;          // guarded by mu_ (started once)
};

}  // namespace dlock::mysql
