// PgConn: one libpq connection used as a lock session, with client-side deadlines on every
// wait (libpq's own calls would block without bound) and the session settings that make S
// the dead-client bound (brief §3.a; README.md, "Bounds").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <libpq-fe.h>

#include "options.h"

namespace dlock::postgres {

struct ResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// The startup `options` string (-c name=value …) of every lock connection.
std::string session_settings(const PgOptions& o);

// Not thread-safe: its owner (a Session) serialises every use.
class PgConn {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects within o.connect_timeout per host (several hosts are tried in turn, as libpq
  // does: the next one when a host cannot be reached or does not answer in time; a server's
  // refusal, e.g. a wrong password, ends the attempt) and
  // applies session_settings() in advisory mode (lease mode sends no startup options, which
  // a pooler such as PgBouncer would refuse). `application_name` names the connection in pg_stat_activity.
  // Throws Error (errors.h) naming `where`, never the password.
  static std::unique_ptr<PgConn> open(const PgOptions& o, const std::string& application_name);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  PGconn* raw() const noexcept { return conn_; }
  int socket() const noexcept { return PQsocket(conn_); }
  bool ok() const noexcept { return PQstatus(conn_) == CONNECTION_OK && !fatal_seen_; }
  int server_version() const noexcept { return PQserverVersion(conn_); }
  // The server process serving this connection (its target for pg_cancel_backend).
  int backend_pid() const noexcept { return PQbackendPID(conn_); }
  bool in_flight() const noexcept { return in_flight_; }
  const std::string& where() const noexcept { return where_; }

  // Runs `sql` (simple protocol; several statements allowed) and throws the translated
  // error of the first failing statement. Throws unavailable at `deadline`.
  void exec_simple(const std::string& sql, std::string_view doing, Clock::time_point deadline);
  // Runs `sql` and returns its (last) result, error results included.
  ResultPtr query_simple(const std::string& sql, std::string_view doing, Clock::time_point deadline);

  // Sends prepared statement `name` with $1 = key (and $2 = `second` if given: an identity
  // for a bytea, a lock_timeout for a text parameter), in binary (a text's binary form is
  // its bytes).
  // The result is collected by wait_result() or, for the monitor, poll_input()/take_result().
  // Throws unavailable if the connection is broken; drains a statement left in flight by an
  // earlier timeout first (up to `deadline`).
  void send_prepared(const char* name, std::int64_t key, const std::string* second,
                     std::string_view doing, Clock::time_point deadline);
  // Sends `sql` as an unnamed statement with text parameters $1.. (lease mode: no prepared
  // statements, so a transaction pooler can carry it).
  void send_params(const std::string& sql, const std::vector<std::string>& params,
                   std::string_view doing, Clock::time_point deadline);
  // Sends `sql` on the simple protocol (several statements: one result each).
  void send_simple(const std::string& sql, std::string_view doing, Clock::time_point deadline);
  // Waits for the statement in flight and returns every result it produced.
  std::vector<ResultPtr> wait_results(Clock::time_point deadline, std::string_view doing);
  // Sends an empty query: a liveness probe.
  void send_ping(std::string_view doing, Clock::time_point deadline);

  // Waits until the statement in flight has finished, up to `deadline`. Returns its result
  // (the first error result if any, else the first result). Throws unavailable on a broken
  // connection or at the deadline (then the statement stays in flight: in_flight()).
  ResultPtr wait_result(Clock::time_point deadline, std::string_view doing);

  // For a socket found readable: reads what arrived without blocking. Returns false if the
  // connection broke (EOF, reset) or the server announced its end (a FATAL while idle).
  bool poll_input() noexcept;
  // True once the statement in flight has its full result (after poll_input()).
  bool result_ready() const noexcept { return in_flight_ && !PQisBusy(conn_); }
  // Collects the finished statement's result (REQUIRES: result_ready()).
  ResultPtr take_result();

  // Asks the server to cancel the statement in flight (a new short connection, about one
  // round trip) and waits for the server to take the request, up to `deadline`. Returns
  // true once it did; false if it could not be sent or was not taken by then (a stalled
  // server: the request, on a thread of its own, may still arrive later and cancel
  // whatever this session runs then, so the caller must drop the connection).
  bool cancel(Clock::time_point deadline) noexcept;

 private:
  PgConn(PGconn* conn, std::string where);
  // One connection attempt with the libpq keywords `kv` (one host), within o.connect_timeout.
  static std::unique_ptr<PgConn> open_one(const PgOptions& o,
                                          const std::vector<std::pair<std::string, std::string>>& kv,
                                          const std::string& doing);
  // Throws unavailable if the server reports itself read-only (a hot standby, or
  // default_transaction_read_only=on): nothing dlock does could succeed there.
  static void refuse_read_only(const PgConn& c);
  void drain(Clock::time_point deadline, std::string_view doing);
  void wait_socket(short events, Clock::time_point deadline, std::string_view doing);

  PGconn* conn_;
  std::string where_;
  bool in_flight_ = false;
  bool fatal_seen_ = false;  // the server announced the session's end (see on_notice)
};

}  // namespace dlock::postgres
