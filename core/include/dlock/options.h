// What a caller asks of an acquire, and what a provider says it can do.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <stop_token>
#include <string>

namespace dlock {

// Exclusive (a writer, or a plain mutex) or shared (a reader). Both modes of one name are
// one read-write lock: an exclusive hold excludes every other hold of that name.
enum class LockMode { exclusive, shared };

struct AcquireOptions {
  // How long the lock stays valid without renewal, on the server's clock. Empty (the
  // default): the provider's default lease, renewed by the watchdog every third of it
  // until release. On a session-based backend an explicit lease is enforced by the client:
  // the lock is released (and the lost signal fired) when it runs out.
  std::optional<std::chrono::milliseconds> lease;
  // Stop renewing after this long and fire the lost signal: a hung holder cannot keep the
  // lock forever. Empty: no limit.
  std::optional<std::chrono::milliseconds> max_hold;
  // Who holds the lock, for reentrancy. Empty (the default): the calling thread. Give an
  // explicit id for async code where one logical owner runs on many threads. 1..256 bytes.
  std::optional<std::string> owner;
  // FIFO among fair waiters. A provider that is not fair rejects it with `unsupported`.
  bool fair = false;
  // Cancels a waiting acquire. A cancelled waiter leaves nothing behind.
  std::stop_token cancel;
};

// How a dead holder's lock is freed.
enum class Liveness {
  lease,    // the server expires the lock when its lease runs out (Redis, SQL lease rows)
  session,  // the lock dies with the holder's session or process (ZooKeeper, advisory locks, files)
};

// What a provider supports. The conformance suite runs every case a provider claims.
struct Capabilities {
  bool reentrant = true;    // the same owner may acquire again; each acquire needs one release
  bool read_write = false;  // LockMode::shared is supported
  bool fair = false;        // AcquireOptions::fair is supported
  bool fencing = false;     // fencing tokens strictly increase across holders of a name
  bool push_wakeup = false; // waiters are woken by the backend, polling only as fallback
  Liveness liveness = Liveness::lease;
  // Longest accepted name, in bytes. Names are any bytes, 1..max_name_bytes.
  std::size_t max_name_bytes = 1024;
  // Lease given when AcquireOptions::lease is empty (renewed by the watchdog).
  std::chrono::milliseconds default_lease{30000};
  // Worst case between the lock becoming lost and the lost signal firing, for a holder
  // using the default lease.
  std::chrono::milliseconds lost_signal_bound{30000};
  // Worst case for which a holder that died keeps others out (default lease).
  std::chrono::milliseconds crash_release_bound{30000};
};

}  // namespace dlock
