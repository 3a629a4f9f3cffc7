#include "connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>

#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>

#include "dlock/support/close_on_exec.h"
#include "errors.h"
#include "socket_fd.h"

namespace dlock::mysql {
namespace {

// get_mysql_driver_instance() is not thread-safe (Connector/C++ 1.1 guide): once, here.
sql::mysql::MySQL_Driver* driver() {
  static std::mutex mu;
  static sql::mysql::MySQL_Driver* d = nullptr;
  std::lock_guard lock(mu);
  if (d == nullptr) d = sql::mysql::get_mysql_driver_instance();
  return d;
}

int whole_seconds(std::chrono::milliseconds d) {
  return static_cast<int>(std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::seconds>(d).count()));
}

// A waiter connection has no read timeout: the kernel finds a dead peer instead (best
// effort: a failing setsockopt leaves the system's keepalive settings).
void keep_alive(int fd, const MysqlOptions& o) {
  const int on = 1;
  const int idle = static_cast<int>(o.wait_chunk.count());
  const int interval = whole_seconds(o.command_timeout);
  const int probes = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

}  // namespace

bool Slots::take(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return open_ < cap_; })) return false;
  ++open_;
  return true;
}

void Slots::give_back() noexcept {
  {
    std::lock_guard lock(mu_);
    --open_;
  }
  cv_.notify_one();
}

std::size_t Slots::open() const {
  std::lock_guard lock(mu_);
  return open_;
}

std::unique_ptr<Connection> Connection::open(const MysqlOptions& o, ConnClass cls,
                                             std::shared_ptr<Slots> slots,
                                             std::atomic<bool>* behind_proxy) {
  std::unique_ptr<Connection> c(new Connection());
  c->slots_ = std::move(slots);  // from here on the destructor gives the slot back
  c->cls_ = cls;
  sql::ConnectOptionsMap opts;
  if (o.unix_path.empty()) {
    // Connector/C++ splits a bare host at its first ':' (as host:port): an IPv6 literal
    // goes in brackets, which its URI parser reads as one address.
    const bool ipv6 = o.host.find(':') != std::string::npos;
    opts["hostName"] = sql::SQLString(ipv6 ? "tcp://[" + o.host + "]:" + std::to_string(o.port) : o.host);
    opts["port"] = static_cast<int>(o.port);
  } else {
    opts["hostName"] = sql::SQLString("localhost");
    opts["socket"] = sql::SQLString(o.unix_path);
  }
  opts["userName"] = sql::SQLString(o.user);
  opts["password"] = sql::SQLString(o.password.value_or(""));
  opts["schema"] = sql::SQLString(o.database);
  // Never resurrect a session: a silent reconnect would lose the row lock without an error.
  opts["OPT_RECONNECT"] = false;
  opts["CLIENT_MULTI_STATEMENTS"] = true;
  opts["OPT_CONNECT_TIMEOUT"] = whole_seconds(o.connect_timeout);
  // Fixed at connect: a server-side wait must fit inside the read timeout.
  const auto read = cls == ConnClass::short_
                        ? o.command_timeout
                        : std::chrono::duration_cast<std::chrono::milliseconds>(o.wait_chunk) + o.command_timeout;
  if (cls != ConnClass::waiter) opts["OPT_READ_TIMEOUT"] = whole_seconds(read);
  opts["OPT_WRITE_TIMEOUT"] = whole_seconds(o.command_timeout);
  if (!o.ssl_ca.empty()) {
    // Fails closed (shared/CLIENT_LIBS.md): sslCA alone falls back to plaintext silently.
    opts["sslCA"] = sql::SQLString(o.ssl_ca);
    opts["sslVerify"] = true;
  }
  if (!o.ssl_cert.empty()) {
    opts["sslCert"] = sql::SQLString(o.ssl_cert);
    opts["sslKey"] = sql::SQLString(o.ssl_key);
  }
  // Behind a port-rewriting proxy the socket is found by arriving (socket_fd.h): note
  // this process's sockets to that port first.
  // The server's addresses: our socket's peer is one of them (the host resolved as the
  // client library resolves it).
  std::vector<IpAddress> server_addresses;
  if (o.unix_path.empty()) server_addresses = resolve_host(o.host);
  const bool by_arrival = o.unix_path.empty() && behind_proxy != nullptr && behind_proxy->load();
  std::vector<SocketId> before;
  if (by_arrival) before = sockets_to(server_addresses, o.port);
  // Connector/C++ opens its socket without O_CLOEXEC: a helper the user execs would keep the
  // session (and its row locks) alive. Whatever the connect opened is marked close-on-exec.
  const std::vector<int> inheritable_before = support::inheritable_descriptors();
  try {
    c->conn_.reset(driver()->connect(opts));
    support::close_new_descriptors_on_exec(inheritable_before);
    c->stmt_.reset(c->conn_->createStatement());
    // Lease statements wait briefly for a row another client is updating; row mode never
    // waits on a short connection (NOWAIT) and waits in chunks on a long one.
    const auto lock_wait = o.mode == Mode::lease ? std::chrono::seconds(1)
                           : cls == ConnClass::short_ ? std::chrono::seconds(0)
                                                      : o.wait_chunk;
    const Rows rows = c->run(setup_batch(o.server_wait_timeout(), lock_wait, o.mode == Mode::lease));
    if (rows.size() != 1 || rows[0].size() != 4 || !rows[0][0]) {
      throw Error(ErrorCode::internal, o.where + ": unexpected answer to the session setup");
    }
    c->id_ = std::strtoull(rows[0][0]->c_str(), nullptr, 10);
    c->version_ = rows[0][1].value_or("");
    c->wsrep_ = rows[0][2].value_or("0") == "1";
    if (o.mode == Mode::row) {
      // The sequence's cache refills are not made durable on their own: after a crash
      // (kill -9 of mariadbd) NEXTVAL was seen to start again below tokens already handed
      // out. Every new session (all are new after a restart) first moves the sequence up
      // to the server clock in µs, which no token reached: it starts there and grows by one
      // per grant. SETVAL never moves a sequence down. The table is missing only on the
      // very first connection, which creates it starting at the clock.
      try {
        c->run(catch_up_sequence_batch(o.table));
      } catch (const sql::SQLException& e) {
        if (e.getErrorCode() != code::no_such_table && e.getErrorCode() != code::unknown_sequence) throw;
      }
    }
    // "ip:port" as the server sees us (a host name instead of the ip when the server
    // resolves names): with the server's address and port it finds our socket, never one
    // to another server with the same ports (brief §1.1).
    c->session_host_ = rows[0][3].value_or("");
    const std::string& host = c->session_host_;
    const auto colon = host.rfind(':');
    bool ambiguous = false;
    if (o.unix_path.empty() && colon != std::string::npos) {
      int port = 0;
      const char* b = host.data() + colon + 1;
      const char* e = host.data() + host.size();
      if (std::from_chars(b, e, port).ptr == e && port > 0 && port < 65536) {
        SocketEnds ends;
        ends.local_address = IpAddress::parse(std::string_view(host).substr(0, colon));
        ends.local_port = static_cast<std::uint16_t>(port);
        ends.remote_addresses = server_addresses;
        ends.remote_port = o.port;
        c->fd_ = find_socket_fd(ends, &ambiguous);
      }
    }
    if (c->fd_ < 0 && o.unix_path.empty()) {
      if (by_arrival) {
        c->fd_ = new_socket_fd(before, sockets_to(server_addresses, o.port));
      } else if (behind_proxy != nullptr && !ambiguous) {
        behind_proxy->store(true);  // the server sees another port: find the next ones by arrival
      }
    }
    if (cls == ConnClass::waiter && c->fd_ >= 0) keep_alive(c->fd_, o);
  } catch (const sql::SQLException& e) {
    throw translate_error(o.where, "connecting", e);
  }
  c->last_used = std::chrono::steady_clock::now();
  return c;
}

bool Connection::hung_up() const noexcept {
  const int fd = fd_.load();
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

Connection::~Connection() {
  const int fd = fd_.exchange(-1);
  if (fd >= 0) release_socket_fd(fd);  // before the close: the number may be reused
  try {
    prepared_.clear();
    stmt_.reset();
    conn_.reset();
  } catch (...) {
  }
  if (slots_) slots_->give_back();
}

void Connection::forget_socket() noexcept {
  broken = true;
  const int fd = fd_.exchange(-1);
  if (fd >= 0) release_socket_fd(fd);
}

Rows Connection::run(const Batch& batch) {
  try {
    return run_batch(batch);
  } catch (const sql::SQLException& e) {
    if (connection_lost(e)) forget_socket();
    throw;
  }
}

Rows Connection::run_batch(const Batch& batch) {
  Rows rows;
  bool has_rs = stmt_->execute(sql::SQLString(batch.text));
  for (int i = 1; i < batch.statements; ++i) {
    // An intermediate result set must be fetched and freed, or the next command fails
    // with 2014 "Commands out of sync".
    if (has_rs) std::unique_ptr<sql::ResultSet>(stmt_->getResultSet());
    has_rs = stmt_->getMoreResults();
  }
  if (has_rs) {
    std::unique_ptr<sql::ResultSet> rs(stmt_->getResultSet());
    const unsigned cols = rs->getMetaData()->getColumnCount();
    while (rs->next()) {
      Row row;
      for (unsigned col = 1; col <= cols; ++col) {
        sql::SQLString v = rs->getString(col);
        if (rs->wasNull()) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(v.asStdString());
        }
      }
      rows.push_back(std::move(row));
    }
  }
  last_used = std::chrono::steady_clock::now();
  return rows;
}

}  // namespace dlock::mysql

namespace dlock::mysql {

Rows Connection::run_prepared_lock(const std::string& sql_text, const std::string& key_hex) {
  try {
    return run_prepared(sql_text, key_hex);
  } catch (const sql::SQLException& e) {
    if (connection_lost(e)) forget_socket();
    throw;
  }
}

Rows Connection::run_prepared(const std::string& sql_text, const std::string& key_hex) {
  if (dirty) {
    stmt_->execute("ROLLBACK");
    dirty = false;
  }
  auto& ps = prepared_[sql_text];
  if (!ps) ps.reset(conn_->prepareStatement(sql::SQLString(sql_text)));
  ps->setString(1, sql::SQLString(key_hex));
  Rows rows;
  std::unique_ptr<sql::ResultSet> rs(ps->executeQuery());
  while (rs->next()) {
    sql::SQLString v = rs->getString(1);
    Row row;
    if (rs->wasNull()) {
      row.emplace_back(std::nullopt);
    } else {
      row.emplace_back(v.asStdString());
    }
    rows.push_back(std::move(row));
  }
  last_used = std::chrono::steady_clock::now();
  return rows;
}

}  // namespace dlock::mysql
