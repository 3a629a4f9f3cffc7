// One Connector/C++ connection with dlock's session settings: never reconnects, read
// timeout fixed at connect (short class: command_timeout; long class: wait_chunk +
// command_timeout, for DDL at open; waiter class: none, see ConnClass), and the socket fd
// recovered for hang-up watching.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dlock/spi/session_holds.h"
#include "options.h"
#include "sql.h"

namespace sql {
class Connection;
class Statement;
class PreparedStatement;
}  // namespace sql

namespace dlock::mysql {

using Row = std::vector<std::optional<std::string>>;
using Rows = std::vector<Row>;

// Counts open connections against the `pool` cap; shared by every connection of a backend.
class Slots {
 public:
  explicit Slots(std::size_t cap) : cap_(cap) {}
  // Takes a slot, waiting until `deadline` for one; false when none came free.
  bool take(std::chrono::steady_clock::time_point deadline);
  void give_back() noexcept;
  std::size_t cap() const noexcept { return cap_; }
  std::size_t open() const;

 private:
  const std::size_t cap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::size_t open_ = 0;
};

// waiter: a server-side wait that lasts as long as the acquire (one statement, so the waiter
// keeps its place in InnoDB's queue) cannot have a read timeout; a dead peer is found by TCP
// keepalive instead (idle wait_chunk, then probes every command_timeout) where the socket
// is known, and a give-up ends the wait by KILL QUERY or by shutting the socket down.
enum class ConnClass { short_, long_, waiter };

// Thread safety: run() takes `mu`; holders of the connection (a hold, a waiter) serialize
// through it. The slot is given back when the connection is destroyed.
class Connection {
 public:
  // Connects and runs the session setup (one round trip). Throws Error (translated).
  // REQUIRES: a slot was taken for it from `slots`. `behind_proxy` (shared by a backend's
  // connections) is set once the server reports a port none of our sockets has, and from
  // then on the socket is found by arrival (socket_fd.h).
  static std::unique_ptr<Connection> open(const MysqlOptions& options, ConnClass cls,
                                          std::shared_ptr<Slots> slots,
                                          std::atomic<bool>* behind_proxy = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs a batch; returns the rows of its last statement's result set (empty if it has
  // none). Throws sql::SQLException (callers translate with their own context); one that
  // says the connection is lost also marks it broken and lets go of its fd (see fd()).
  Rows run(const Batch& batch);

  // The NOWAIT lock statement as a server-side prepared statement (binary protocol, parsed
  // once per connection): `sql_text` with one parameter, the row key in hex. A dirty
  // connection is rolled back first. Same results and errors as run(lock_batch(…)).
  Rows run_prepared_lock(const std::string& sql_text, const std::string& key_hex);

  ConnClass cls() const noexcept { return cls_; }
  // Whether this connection's slot is one of `slots`.
  bool counted_by(const Slots& slots) const noexcept { return slots_.get() == &slots; }
  std::uint64_t id() const noexcept { return id_; }
  // The session's HOST as the server lists it in information_schema.PROCESSLIST ("ip:port"
  // over TCP, "localhost" over a unix socket; "" if the server did not say).
  const std::string& session_host() const noexcept { return session_host_; }
  // The socket's fd in this process, or -1 when it could not be found (unix socket, a
  // proxy that rewrote the port): then only probes notice a dead session. Also -1 once a
  // statement failed with a lost connection: Connector/C has closed the socket then, and
  // its number is no longer claimed, so the next socket opened (which may get the number)
  // is found and watched even while this connection still lives.
  int fd() const noexcept { return fd_.load(); }
  // Whether the socket already reports hang-up (the server or a proxy closed or reset it):
  // one poll(2), no read. False when fd() is unknown.
  bool hung_up() const noexcept;
  const std::string& version() const noexcept { return version_; }
  bool wsrep_on() const noexcept { return wsrep_; }

  std::timed_mutex mu;
  // A transaction may be open (after a busy attempt or a killed wait): the next lock
  // statement starts with ROLLBACK.
  bool dirty = false;
  // Set once the connection failed or its socket hung up: never used again.
  std::atomic<bool> broken{false};
  std::chrono::steady_clock::time_point last_used;
  // The hold pinned on this connection (at most one), for the hang-up fan-out.
  spi::SessionHolds holds;

 private:
  Connection() = default;
  // The connection is lost (Connector/C closed the socket): broken, fd released and -1.
  void forget_socket() noexcept;
  Rows run_batch(const Batch& batch);  // run() without the lost-connection handling
  Rows run_prepared(const std::string& sql_text, const std::string& key_hex);  // likewise
  std::unique_ptr<sql::Connection> conn_;
  std::unique_ptr<sql::Statement> stmt_;
  std::map<std::string, std::unique_ptr<sql::PreparedStatement>> prepared_;
  std::shared_ptr<Slots> slots_;
  ConnClass cls_ = ConnClass::short_;
  std::uint64_t id_ = 0;
  std::string session_host_;
  std::atomic<int> fd_{-1};  // read by other threads (a hold's release, the kill thread)
  std::string version_;
  bool wsrep_ = false;
};

}  // namespace dlock::mysql
