#include "connection.h"

#include <poll.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "errors.h"

namespace dlock::postgres {
namespace {

using std::chrono::ceil;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Notices are dropped (pg_advisory_unlock's WARNING on an unheld key), except that an
// ERROR or FATAL arriving while the connection is idle is libpq's way of delivering the
// server's last words (pg_terminate_backend, shutdown, idle_session_timeout): the socket
// closes only when the server process has exited, tens of milliseconds later.
void on_notice(void* arg, const PGresult* r) {
  const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity != nullptr && (std::strcmp(severity, "FATAL") == 0 || std::strcmp(severity, "PANIC") == 0)) {
    *static_cast<bool*>(arg) = true;
  }
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (true) {
    const auto comma = list.find(',', from);
    out.push_back(list.substr(from, comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

long long secs_up(milliseconds d) { return std::max<long long>(1, ceil<seconds>(d).count()); }

[[noreturn]] void timed_out(const std::string& where, std::string_view doing) {
  throw Error(ErrorCode::unavailable,
              where + ": " + std::string(doing) + ": no answer within the command timeout");
}

}  // namespace

std::string session_settings(const PgOptions& o) {
  const long long s_ms = o.session_timeout.count();
  // Nothing on the server may end the session before S (brief §1.1): idle_session_timeout
  // is S, and TCP keepalives give up after idle + 5 × interval = S at the earliest.
  std::string out = "-c synchronous_commit=off";
  out += " -c idle_session_timeout=" + std::to_string(s_ms);
  out += " -c idle_in_transaction_session_timeout=0 -c statement_timeout=0";
  out += " -c lock_timeout=" + std::to_string(o.wait_chunk.count());
  out += " -c client_connection_check_interval=100";
  out += " -c tcp_user_timeout=" + std::to_string(s_ms);
  out += " -c tcp_keepalives_idle=" + std::to_string(secs_up(o.session_timeout / 2));
  out += " -c tcp_keepalives_interval=" + std::to_string(secs_up(o.session_timeout / 10));
  out += " -c tcp_keepalives_count=5";
  return out;
}

PgConn::PgConn(PGconn* conn, std::string where) : conn_(conn), where_(std::move(where)) {
  PQsetNoticeReceiver(conn_, on_notice, &fatal_seen_);
}

PgConn::~PgConn() { PQfinish(conn_); }

std::unique_ptr<PgConn> PgConn::open(const PgOptions& o, const std::string& application_name) {
  std::vector<std::pair<std::string, std::string>> kv = o.conninfo;
  const milliseconds s = o.session_timeout;
  kv.emplace_back("application_name", application_name);
  if (o.mode == Mode::advisory) kv.emplace_back("options", session_settings(o));
  kv.emplace_back("connect_timeout", std::to_string(std::max<long long>(2, secs_up(o.connect_timeout))));
  // The client notices a dead server too (the core's probes are the fallback).
  kv.emplace_back("keepalives", "1");
  kv.emplace_back("keepalives_idle", std::to_string(secs_up(s / 2)));
  kv.emplace_back("keepalives_interval", std::to_string(secs_up(s / 10)));
  kv.emplace_back("keepalives_count", "5");
  kv.emplace_back("tcp_user_timeout", std::to_string(s.count()));
  // connect_timeout is per host, as in libpq; but libpq's non-blocking connect cannot be
  // told to move on to the next host when our deadline passes, so each host gets a
  // connection attempt of its own. parse_options() lists as many ports as hosts.
  std::string* host = nullptr;
  std::string* port = nullptr;
  for (auto& [k, v] : kv) {
    if (k == "host") host = &v;
    if (k == "port") port = &v;
  }
  const std::vector<std::string> hosts = split_list(*host), ports = split_list(*port);
  std::string failures;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    *host = hosts[i];
    *port = ports.at(i);
    const std::string doing = hosts.size() == 1 ? "connect" : "connect to " + hosts[i] + ":" + ports[i];
    std::unique_ptr<PgConn> conn;
    try {
      conn = open_one(o, kv, doing);
    } catch (const Error& e) {
      // Like libpq, only a host that cannot be reached passes the turn; a server's refusal
      // (password, database, pg_hba) ends the attempt.
      if (e.code() != ErrorCode::unavailable || hosts.size() == 1) throw;
      failures += (failures.empty() ? "" : "; ") + e.message();
      if (i + 1 == hosts.size()) throw Error(ErrorCode::unavailable, failures);
      continue;
    }
    // A read-only server is refused, not passed over: libpq lands there too unless told
    // target_session_attrs=read-write, which the refusal names.
    refuse_read_only(*conn);
    return conn;
  }
  throw Error(ErrorCode::internal, o.where + ": connect: no host");  // parse_options needs one
}

std::unique_ptr<PgConn> PgConn::open_one(const PgOptions& o,
                                         const std::vector<std::pair<std::string, std::string>>& kv,
                                         const std::string& doing) {
  const auto deadline = Clock::now() + o.connect_timeout;
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : kv) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* raw = PQconnectStartParams(keys.data(), values.data(), 0);
  if (raw == nullptr) throw translate_error(o.where, doing, nullptr, nullptr);
  std::unique_ptr<PgConn> conn(new PgConn(raw, o.where));
  if (PQstatus(raw) == CONNECTION_BAD) throw translate_error(o.where, doing, raw, nullptr);
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (true) {
    if (st == PGRES_POLLING_OK) break;
    if (st == PGRES_POLLING_FAILED) throw translate_error(o.where, doing, raw, nullptr);
    try {
      conn->wait_socket(st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline, doing);
    } catch (const Error&) {
      throw Error(ErrorCode::unavailable, o.where + ": " + doing + ": no answer within connect_timeout (" +
                                              std::to_string(o.connect_timeout.count()) + "ms)");
    }
    st = PQconnectPoll(raw);
  }
  return conn;
}

void PgConn::refuse_read_only(const PgConn& c) {
  // Reported by servers ≥ 14 in the startup answer (0 round trips). A standby would fail
  // every write with 25006 anyway; saying so at connect names the fix.
  auto on = [&](const char* name) {
    const char* v = PQparameterStatus(c.conn_, name);
    return v != nullptr && std::strcmp(v, "on") == 0;
  };
  if (on("in_hot_standby")) {
    throw Error(ErrorCode::unavailable,
                c.where_ + ": connect: the server is a read-only hot standby: point the URI at the "
                           "primary, e.g. list every host with target_session_attrs=read-write");
  }
  if (on("default_transaction_read_only")) {
    throw Error(ErrorCode::unavailable,
                c.where_ + ": connect: the server makes transactions read-only "
                           "(default_transaction_read_only=on for this role, database or server): "
                           "dlock must write; use a read-write primary and role");
  }
}

void PgConn::wait_socket(short events, Clock::time_point deadline, std::string_view doing) {
  while (true) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) timed_out(where_, doing);
    pollfd p{PQsocket(conn_), events, 0};
    if (p.fd < 0) throw translate_error(where_, doing, conn_, nullptr);
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (n > 0) return;
    if (n < 0 && errno != EINTR) {
      throw Error(ErrorCode::unavailable, where_ + ": " + std::string(doing) + ": poll: " + std::strerror(errno));
    }
  }
}

void PgConn::drain(Clock::time_point deadline, std::string_view doing) {
  if (in_flight_) (void)wait_result(deadline, doing);
}

ResultPtr PgConn::wait_result(Clock::time_point deadline, std::string_view doing) {
  while (PQisBusy(conn_)) {
    if (PQstatus(conn_) != CONNECTION_OK) break;
    wait_socket(POLLIN, deadline, doing);
    if (!PQconsumeInput(conn_)) {
      in_flight_ = false;
      throw translate_error(where_, doing, conn_, nullptr);
    }
  }
  return take_result();
}

ResultPtr PgConn::take_result() {
  ResultPtr first;
  while (PGresult* r = PQgetResult(conn_)) {
    ResultPtr res(r);
    const auto st = PQresultStatus(r);
    const bool error = st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR;
    if (!first || (error && PQresultStatus(first.get()) != PGRES_FATAL_ERROR)) first = std::move(res);
  }
  in_flight_ = false;
  if (!first) throw translate_error(where_, "reading a result", conn_, nullptr);
  // A fatal result on a connection that broke is a lost connection, not an SQL error.
  if (PQresultStatus(first.get()) == PGRES_FATAL_ERROR && PQstatus(conn_) != CONNECTION_OK &&
      sqlstate_of(first.get()).empty()) {
    throw translate_error(where_, "reading a result", conn_, nullptr);
  }
  return first;
}

void PgConn::send_prepared(const char* name, std::int64_t key, const std::string* second,
                           std::string_view doing, Clock::time_point deadline) {
  drain(deadline, doing);
  std::uint64_t k;
  std::memcpy(&k, &key, sizeof k);
  char key_be[8];
  for (int i = 7; i >= 0; --i, k >>= 8) key_be[i] = static_cast<char>(k & 0xff);
  const char* values[2] = {key_be, second ? second->data() : nullptr};
  const int lengths[2] = {8, second ? static_cast<int>(second->size()) : 0};
  const int formats[2] = {1, 1};
  if (!PQsendQueryPrepared(conn_, name, second ? 2 : 1, values, lengths, formats, 0)) {
    throw translate_error(where_, doing, conn_, nullptr);
  }
  in_flight_ = true;
}

void PgConn::send_params(const std::string& sql, const std::vector<std::string>& params,
                         std::string_view doing, Clock::time_point deadline) {
  drain(deadline, doing);
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  if (!PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                         nullptr, nullptr, 0)) {
    throw translate_error(where_, doing, conn_, nullptr);
  }
  in_flight_ = true;
}

void PgConn::send_simple(const std::string& sql, std::string_view doing, Clock::time_point deadline) {
  drain(deadline, doing);
  if (!PQsendQuery(conn_, sql.c_str())) throw translate_error(where_, doing, conn_, nullptr);
  in_flight_ = true;
}

std::vector<ResultPtr> PgConn::wait_results(Clock::time_point deadline, std::string_view doing) {
  while (PQisBusy(conn_)) {
    if (PQstatus(conn_) != CONNECTION_OK) break;
    wait_socket(POLLIN, deadline, doing);
    if (!PQconsumeInput(conn_)) {
      in_flight_ = false;
      throw translate_error(where_, doing, conn_, nullptr);
    }
  }
  std::vector<ResultPtr> all;
  while (true) {
    // Between the results of a multi-statement query libpq may need more input.
    while (PQisBusy(conn_)) {
      wait_socket(POLLIN, deadline, doing);
      if (!PQconsumeInput(conn_)) {
        in_flight_ = false;
        throw translate_error(where_, doing, conn_, nullptr);
      }
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    all.emplace_back(r);
  }
  in_flight_ = false;
  if (PQstatus(conn_) != CONNECTION_OK) throw translate_error(where_, doing, conn_, nullptr);
  return all;
}

void PgConn::send_ping(std::string_view doing, Clock::time_point deadline) {
  drain(deadline, doing);
  if (!PQsendQuery(conn_, "")) throw translate_error(where_, doing, conn_, nullptr);
  in_flight_ = true;
}

ResultPtr PgConn::query_simple(const std::string& sql, std::string_view doing, Clock::time_point deadline) {
  drain(deadline, doing);
  if (!PQsendQuery(conn_, sql.c_str())) throw translate_error(where_, doing, conn_, nullptr);
  in_flight_ = true;
  return wait_result(deadline, doing);
}

void PgConn::exec_simple(const std::string& sql, std::string_view doing, Clock::time_point deadline) {
  ResultPtr r = query_simple(sql, doing, deadline);
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
    throw translate_error(where_, doing, conn_, r.get());
  }
}

bool PgConn::poll_input() noexcept {
  if (!PQconsumeInput(conn_)) return false;
  (void)PQisBusy(conn_);  // parses what arrived: an idle connection's FATAL reaches on_notice
  return PQstatus(conn_) == CONNECTION_OK && !fatal_seen_;
}

bool PgConn::cancel(Clock::time_point deadline) noexcept {
  // libpq 15's PQcancel has no timeout (it waits for the postmaster to close the request's
  // connection), so it runs on a thread of its own that owns the PGcancel; PQcancelCreate,
  // which could be polled, is PostgreSQL 17's. Stalled servers leave one such thread each
  // until they answer (or TCP gives up): past kMaxStuck the request is not sent at all.
  constexpr int kMaxStuck = 16;
  static std::atomic<int> outstanding{0};
  PGcancel* c = PQgetCancel(conn_);
  if (c == nullptr) return false;
  if (outstanding.fetch_add(1) >= kMaxStuck) {
    outstanding.fetch_sub(1);
    PQfreeCancel(c);
    return false;
  }
  try {
    std::packaged_task<bool()> task([c] {
      char err[256];
      const bool ok = PQcancel(c, err, sizeof err) == 1;
      PQfreeCancel(c);
      outstanding.fetch_sub(1);
      return ok;
    });
    std::future<bool> taken = task.get_future();
    std::thread(std::move(task)).detach();
    return taken.wait_until(deadline) == std::future_status::ready && taken.get();
  } catch (...) {  // no thread could be started
    outstanding.fetch_sub(1);
    PQfreeCancel(c);
    return false;
  }
}

}  // namespace dlock::postgres
