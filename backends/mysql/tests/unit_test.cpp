// Unit tests of the mysql backend's pure parts: URI parsing, the SQL builder, name hashing,
// socket discovery by arrival, parked waiter threads.
// No server needed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/error.h"
#include "dlock/uri.h"
#include "errors.h"
#include "fd_monitor.h"
#include "keys.h"
#include "lease_sql.h"
#include "options.h"
#include "read_bound.h"
#include "socket_fd.h"
#include "sql.h"
#include "waiter_threads.h"

namespace dlock::mysql {
namespace {

MysqlOptions parse(const std::string& text) { return parse_options(Uri::parse(text)); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

TEST(MysqlUri, Defaults) {
  const auto o = parse("mysql://u:secret@db.example:3307/app");
  EXPECT_EQ(o.host, "db.example");
  EXPECT_EQ(o.port, 3307);
  EXPECT_EQ(o.user, "u");
  EXPECT_EQ(o.password.value(), "secret");
  EXPECT_EQ(o.database, "app");
  EXPECT_EQ(o.table, "dlock_lock");
  EXPECT_EQ(o.prefix, "");
  EXPECT_EQ(o.mode, Mode::row);
  EXPECT_EQ(o.session_timeout, std::chrono::seconds(10));
  EXPECT_EQ(o.connect_timeout, std::chrono::seconds(2));
  EXPECT_EQ(o.command_timeout, std::chrono::seconds(2));
  EXPECT_EQ(o.wait_chunk, std::chrono::seconds(30));
  EXPECT_EQ(o.pool, 64u);
  EXPECT_TRUE(o.create_tables);
  EXPECT_EQ(o.where.find("secret"), std::string::npos);
  EXPECT_EQ(parse("mysql://u@h/app").port, 3306);
}

TEST(MysqlUri, EveryParameter) {
  const auto o = parse(
      "mariadb://u:p@127.0.0.1/app?table=locks_1&prefix=svc%2Fa&session_timeout=1500ms&"
      "connect_timeout=3s&command_timeout=700ms&wait_chunk=5s&pool=3&create_tables=false&"
      "ssl_ca=/ca.pem&ssl_cert=/c.pem&ssl_key=/k.pem&mode=lease");
  EXPECT_EQ(o.table, "locks_1");
  EXPECT_EQ(o.prefix, "svc/a");
  EXPECT_EQ(o.session_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(o.session_seconds(), std::chrono::seconds(2));  // wait_timeout rounds up
  EXPECT_EQ(o.connect_timeout, std::chrono::seconds(3));
  EXPECT_EQ(o.command_timeout, std::chrono::milliseconds(700));
  EXPECT_EQ(o.wait_chunk, std::chrono::seconds(5));
  EXPECT_EQ(o.pool, 3u);
  EXPECT_FALSE(o.create_tables);
  EXPECT_EQ(o.ssl_ca, "/ca.pem");
  EXPECT_EQ(o.ssl_cert, "/c.pem");
  EXPECT_EQ(o.ssl_key, "/k.pem");
  EXPECT_EQ(o.mode, Mode::lease);
  EXPECT_EQ(parse("mysql://u@h/app?mode=lease").table, "dlock_lease");
  EXPECT_EQ(parse("mysql://u@h/app?mode=row").table, "dlock_lock");
}

TEST(MysqlUri, UnixSocket) {
  const auto o = parse("mysql+unix://u:p@/run/mysqld/mysqld.sock?db=app");
  EXPECT_EQ(o.unix_path, "/run/mysqld/mysqld.sock");
  EXPECT_EQ(o.database, "app");
  EXPECT_TRUE(o.host.empty());
  EXPECT_NE(error_of("mysql+unix://u@/run/x.sock").find("database"), std::string::npos);
  EXPECT_NE(error_of("mysql+unix://u@/?db=app").find("socket"), std::string::npos);
}

TEST(MysqlUri, BadInputNamesTheProblemWithoutThePassword) {
  EXPECT_NE(error_of("mysql://u:hunter2@h/app?bogus=1").find("bogus"), std::string::npos);
  EXPECT_EQ(error_of("mysql://u:hunter2@h/app?bogus=1").find("hunter2"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/").find("database"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app;drop").find("database"), std::string::npos);
  EXPECT_NE(error_of("mysql://h/app").find("user"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h1,h2/app").find("one host"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?table=a%60b").find("table"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?table=" + std::string(55, 'a')).find("table"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?mode=named").find("mode"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?session_timeout=500ms").find("session_timeout"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?session_timeout=fast").find("session_timeout"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?wait_chunk=500ms").find("wait_chunk"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?pool=1").find("pool"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?ssl_cert=/c.pem").find("ssl_key"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h/app?prefix=" + std::string(257, 'p')).find("prefix"), std::string::npos);
  EXPECT_NE(error_of("mysql://u@h:99999/app").find("port"), std::string::npos);
}

// An unknown parameter may be a password under another name (pw=): named, never shown,
// also when another parameter is the one at fault.
TEST(MysqlUri, AnUnknownParametersValueIsNeverShown) {
  const std::string pw_only = error_of("mysql://u@h/app?pw=hunter2");
  EXPECT_NE(pw_only.find("pw"), std::string::npos) << pw_only;
  EXPECT_EQ(pw_only.find("hunter2"), std::string::npos) << pw_only;
  for (const char* query : {"pw=hunter2&table=a%60b", "pw=hunter2&pool=1", "pw=hunter2&mode=x"}) {
    const std::string message = error_of(std::string("mysql://u@h/app?") + query);
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

// 2005 (unknown server host) is a DNS failure as often as a typo, and a DNS outage passes:
// retryable, like a refused connection.
TEST(MysqlErrors, UnknownHostIsUnavailable) {
  const sql::SQLException e("Unknown server host 'db.example' (-3)", "HY000", 2005);
  const Error err = translate_error("mysql db.example:3306/app", "connecting", e);
  EXPECT_EQ(err.code(), ErrorCode::unavailable) << err.what();
  EXPECT_NE(err.message().find("host"), std::string::npos) << err.what();
}

TEST(MysqlKeys, Sha256OfPrefixZeroName) {
  // hashlib.sha256(prefix + b"\0" + name).hexdigest()
  EXPECT_EQ(row_key_hex("", "a"), "022a6979e6dab7aa5ae4c3e5e45f7e977112a7e63593820dbec1ec738a24f93c");
  EXPECT_EQ(row_key_hex("p", "a"), "a11efd2502f9ff344cb3b2fc6d7d5145f5c877dd22aa7b7c359824fbd3cb203e");
  // The separator keeps ("a","bc") and ("ab","c") apart.
  EXPECT_EQ(row_key_hex("a", "bc"), "40bb547d936bbd31318ee37ac8799e7ecbb22eda2651f65e3214bffb8ce97bb4");
  EXPECT_EQ(row_key_hex("ab", "c"), "6c032e631d39a14d85aff7e319546af701e26c97b57ca95fbfe9c6ba855f67bf");
  EXPECT_NE(row_key_hex("", "A"), row_key_hex("", "a"));  // case-sensitive
}

TEST(MysqlKeys, KeysOfExistingRowsNeverChange) {
  // Rows already in users' tables were keyed by the first implementation (its own OpenSSL
  // calls); the digests below are Python's hashlib, so a new SHA-256 path must match them
  // byte for byte: NUL, 0xff, quotes and wildcards in the name, and a 1024-byte name.
  EXPECT_EQ(row_key_hex("dlock", std::string("n\0\xff'\\%_", 7)),
            "fa7b3f1e6fd2d58809f402d0f48fce74ece0ef473e065d7d8f1f058abd5da1a9");
  EXPECT_EQ(row_key_hex("", std::string(1024, 'x')),
            "77942448051152f6eb534e25436ade9247693deed95190fbe14af341ac771514");
}

TEST(MysqlKeys, HexCoversEveryByte) {
  EXPECT_EQ(to_hex(std::string("a'\\%_\0\xff", 7)), "61275c255f00ff");
  EXPECT_EQ(to_hex(""), "");
  const std::string big(4096, '\'');
  EXPECT_EQ(to_hex(big).find_first_not_of("27"), std::string::npos);
}

TEST(MysqlSql, SetupPinsTheSession) {
  const Batch b = setup_batch(std::chrono::seconds(3), std::chrono::seconds(0));
  EXPECT_EQ(b.statements, 3);
  EXPECT_NE(b.text.find("autocommit=0"), std::string::npos);
  EXPECT_NE(b.text.find("wait_timeout=3"), std::string::npos);
  EXPECT_NE(b.text.find("innodb_lock_wait_timeout=0"), std::string::npos);
  EXPECT_NE(b.text.find("idle_transaction_timeout=0"), std::string::npos);
  EXPECT_NE(b.text.find("READ COMMITTED"), std::string::npos);
  EXPECT_NE(b.text.find("@@wsrep_on"), std::string::npos);
  EXPECT_NE(b.text.find("PROCESSLIST"), std::string::npos);
}

TEST(MysqlSql, LockStatements) {
  const std::string k(64, 'a');
  EXPECT_EQ(lock_batch("t", k, LockMode::exclusive, Wait{}, false).text,
            "SELECT NEXTVAL(`t_seq`) FROM `t` WHERE k=X'" + k + "' FOR UPDATE NOWAIT");
  const Batch shared = lock_batch("t", k, LockMode::shared, Wait{std::chrono::seconds(30)}, true);
  EXPECT_EQ(shared.statements, 2);
  EXPECT_EQ(shared.text, "ROLLBACK;SELECT NEXTVAL(`t_seq`) FROM `t` WHERE k=X'" + k +
                             "' LOCK IN SHARE MODE WAIT 30");
  EXPECT_EQ(prepared_lock_sql("t", LockMode::exclusive),
            "SELECT NEXTVAL(`t_seq`) FROM `t` WHERE k=UNHEX(?) FOR UPDATE NOWAIT");
  EXPECT_EQ(prepared_lock_sql("t", LockMode::shared),
            "SELECT NEXTVAL(`t_seq`) FROM `t` WHERE k=UNHEX(?) LOCK IN SHARE MODE NOWAIT");
  const Batch ins = insert_row_batch("t", k, "00ff");
  EXPECT_EQ(ins.statements, 3);
  EXPECT_NE(ins.text.find("INSERT IGNORE INTO `t` (k, name) VALUES (X'" + k + "', X'00ff')"), std::string::npos);
  EXPECT_NE(ins.text.find("innodb_lock_wait_timeout=0"), std::string::npos);
}

TEST(MysqlSql, DdlStartsTheSequenceAtTheGivenValue) {
  const Batch b = create_tables_batch("locks", 1795371701497656ULL);
  EXPECT_EQ(b.statements, 2);
  EXPECT_NE(b.text.find("CREATE TABLE IF NOT EXISTS `locks`"), std::string::npos);
  EXPECT_NE(b.text.find("CREATE SEQUENCE IF NOT EXISTS `locks_seq` START WITH 1795371701497656"),
            std::string::npos);
}

TEST(MysqlLeaseSql, AcquireTakesOverOnlyAFreeOrExpiredRowOnTheServerClock) {
  const std::string k(64, 'b');
  const Batch b = lease_acquire_batch("l", k, "6e", "6f", std::chrono::milliseconds(1500));
  EXPECT_EQ(b.statements, 4);
  EXPECT_NE(b.text.find("@dlock_now := CAST(UNIX_TIMESTAMP(NOW(6))*1000000 AS SIGNED)"), std::string::npos);
  EXPECT_NE(b.text.find("INSERT IGNORE INTO `l`"), std::string::npos);
  EXPECT_NE(b.text.find("token = GREATEST(token + 1, @dlock_now), expires_at = @dlock_now + 1500000 "
                        "WHERE k = X'" + k + "' AND expires_at <= @dlock_now"),
            std::string::npos);
}

TEST(MysqlLeaseSql, ReleaseAndRenewAreOwnerAndTokenChecked) {
  const std::string k(64, 'c');
  const Batch r = lease_release_batch("l", k, "6f", 42);
  EXPECT_NE(r.text.find("WHERE k = X'" + k + "' AND owner = X'6f' AND token = 42"), std::string::npos);
  const Batch n = lease_renew_batch("l", {{k, "6f", 42}, {k, "70", 43}}, std::chrono::milliseconds(2000));
  EXPECT_EQ(n.statements, 3);
  EXPECT_NE(n.text.find("(k = X'" + k + "' AND owner = X'6f' AND token = 42) OR (k = X'" + k +
                        "' AND owner = X'70' AND token = 43)"),
            std::string::npos);
  EXPECT_NE(n.text.find("AND expires_at > @dlock_now"), std::string::npos);
}

}  // namespace
}  // namespace dlock::mysql

namespace dlock::mysql {
namespace {

TEST(MysqlSocketFd, AddressesAreComparedAsTheKernelReportsThem) {
  ASSERT_TRUE(IpAddress::parse("[::1]"));
  EXPECT_EQ(IpAddress::parse("[::1]"), IpAddress::parse("::1"));
  EXPECT_EQ(IpAddress::parse("::ffff:127.0.0.1"), IpAddress::parse("127.0.0.1"));
  EXPECT_NE(IpAddress::parse("127.0.0.1"), IpAddress::parse("127.0.0.2"));
  EXPECT_FALSE(IpAddress::parse("localhost"));
  const auto loopback = resolve_host("127.0.0.1");
  ASSERT_EQ(loopback.size(), 1U);
  EXPECT_EQ(loopback[0], *IpAddress::parse("127.0.0.1"));
}

TEST(MysqlSocketFd, TheNewSocketIsTheOneThatArrivedUnclaimed) {
  const std::vector<SocketId> before{{3, 10}, {4, 11}};
  // One socket arrived: it is ours, and claimed for this connection.
  EXPECT_EQ(new_socket_fd(before, {{3, 10}, {4, 11}, {7, 12}}), 7);
  // Claimed now: a concurrent discovery does not take it.
  EXPECT_EQ(new_socket_fd(before, {{3, 10}, {4, 11}, {7, 12}}), -1);
  release_socket_fd(7);
  // An fd number reused by another socket (another inode) arrived too.
  EXPECT_EQ(new_socket_fd(before, {{3, 99}, {4, 11}}), 3);
  release_socket_fd(3);
  // Two arrivals (a concurrent connect): no guess.
  EXPECT_EQ(new_socket_fd(before, {{3, 10}, {4, 11}, {7, 12}, {8, 13}}), -1);
  // Nothing arrived.
  EXPECT_EQ(new_socket_fd(before, before), -1);
}

// A duplicate of a socket that was already there (a deadline's reference to another
// connection's socket, read_bound.h) is no arrival: the one new socket is still found.
TEST(MysqlSocketFd, ADuplicateOfAnOldSocketIsNoArrival) {
  const std::vector<SocketId> before{{3, 10}, {4, 11}};
  EXPECT_EQ(new_socket_fd(before, {{3, 10}, {4, 11}, {9, 10}, {7, 12}}), 7);
  release_socket_fd(7);
}

// A socket of this test bound to `ip:port` (0: any port), SO_REUSEADDR so two connecting
// sockets may share a local address, as Linux lets connections to different servers do.
int bound_socket(int type, const char* ip, std::uint16_t port) {
  const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool connect_to(int fd, const char* ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

std::uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// The lock connection's socket (127.0.0.1:L to a server at 127.0.0.1:P) among decoys with
// the same two ports and lower fd numbers: a UDP socket with the very same addresses, and a
// TCP connection from the same local address to another server on the same port (Linux
// gives connections to different servers the same ephemeral port). Only the connection's
// own TCP socket is its socket: the decoys' errors must never be taken for its hang-up, nor
// must they be shut down at its deadlines.
TEST(MysqlSocketFd, FindsTheConnectionsOwnTcpSocketNotADecoyWithTheSamePorts) {
  const int server = bound_socket(SOCK_STREAM, "127.0.0.1", 0);
  ASSERT_GE(server, 0);
  ASSERT_EQ(::listen(server, 8), 0);
  const std::uint16_t server_port = local_port(server);
  const int other_server = bound_socket(SOCK_STREAM, "127.0.0.2", server_port);
  ASSERT_GE(other_server, 0) << "127.0.0.2:" << server_port << " is taken";
  ASSERT_EQ(::listen(other_server, 8), 0);

  const int conn = bound_socket(SOCK_STREAM, "127.0.0.1", 0);
  ASSERT_GE(conn, 0);
  const std::uint16_t port = local_port(conn);
  const int udp_decoy = bound_socket(SOCK_DGRAM, "127.0.0.1", port);
  ASSERT_GE(udp_decoy, 0);
  ASSERT_TRUE(connect_to(udp_decoy, "127.0.0.1", server_port));
  const int tcp_decoy = bound_socket(SOCK_STREAM, "127.0.0.1", port);
  ASSERT_GE(tcp_decoy, 0);
  ASSERT_TRUE(connect_to(tcp_decoy, "127.0.0.2", server_port));
  ASSERT_TRUE(connect_to(conn, "127.0.0.1", server_port));
  // The connection's fd above the decoys' (/proc/self/fd lists fds in ascending order).
  const int own = ::fcntl(conn, F_DUPFD_CLOEXEC, std::max(udp_decoy, tcp_decoy) + 1);
  ASSERT_GT(own, std::max(udp_decoy, tcp_decoy));
  ::close(conn);

  const IpAddress loopback = *IpAddress::parse("127.0.0.1");
  const IpAddress other = *IpAddress::parse("127.0.0.2");
  SocketEnds ends{loopback, port, {loopback}, server_port};
  EXPECT_EQ(find_socket_fd(ends), own);
  // Claimed now: a concurrent discovery does not take it, nor a decoy in its place.
  bool ambiguous = false;
  EXPECT_EQ(find_socket_fd(ends, &ambiguous), -1);
  EXPECT_TRUE(ambiguous);
  release_socket_fd(own);
  // A server that reports our host by name: the peer's address still tells them apart.
  ends.local_address.reset();
  EXPECT_EQ(find_socket_fd(ends), own);
  release_socket_fd(own);
  // A host name that resolves to both servers: two sockets match, no guess.
  ends.remote_addresses.push_back(other);
  EXPECT_EQ(find_socket_fd(ends, &ambiguous), -1);
  EXPECT_TRUE(ambiguous);
  // By arrival (behind a proxy): only TCP sockets to the server count.
  const auto to_server = sockets_to({loopback}, server_port);
  ASSERT_EQ(to_server.size(), 1U);
  EXPECT_EQ(to_server[0].fd, own);

  for (const int fd : {own, tcp_decoy, udp_decoy, other_server, server}) ::close(fd);
}

// A read blocked past its deadline fails at once (the socket is shut down); a statement that
// answered first is never touched.
TEST(MysqlReadBound, ShutsABlockedReadDownAtItsDeadlineOnly) {
  ReadBound bound;
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const auto early = bound.arm(fds[0], std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_FALSE(bound.disarm(early));
  const auto t0 = std::chrono::steady_clock::now();
  const auto id = bound.arm(fds[0], t0 + std::chrono::milliseconds(50));
  char c = 0;
  EXPECT_EQ(::recv(fds[0], &c, 1, 0), 0) << "the blocked read was not ended";
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(45));
  EXPECT_LT(took, std::chrono::seconds(2));
  EXPECT_TRUE(bound.disarm(id));
  EXPECT_FALSE(bound.disarm(id));
  ::close(fds[0]);
  ::close(fds[1]);
}

// M4 (review my): before_shutdown runs while the socket is still open (a probe marks its
// holds lost there, before the server can read the FIN), and disarm() waits for it.
TEST(MysqlReadBound, RunsBeforeShutdownWhileTheSocketIsStillOpen) {
  ReadBound bound;
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  std::atomic<int> sent_before{-2};
  const auto check = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    sent_before = static_cast<int>(::send(fds[0], "x", 1, MSG_NOSIGNAL));
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  const auto id = bound.arm(fds[0], deadline, check);
  char c = 0;
  EXPECT_EQ(::recv(fds[0], &c, 1, 0), 0) << "the blocked read was not ended";
  EXPECT_EQ(sent_before.load(), 1) << "the socket was shut down before the callback ran";
  EXPECT_TRUE(bound.disarm(id));
  EXPECT_EQ(::send(fds[0], "y", 1, MSG_NOSIGNAL), -1) << "not shut down after the callback";
  ::close(fds[0]);
  ::close(fds[1]);
}

// M5 (review my): the deadline shuts down the socket that was armed, not whatever its fd
// number names by then: Connector/C closes the fd inside a statement whose connection the
// server closed (KILL, shutdown), and another thread may be given the number before disarm.
TEST(MysqlReadBound, ShutsTheArmedSocketDownNotAReuseOfItsNumber) {
  ReadBound bound;
  int armed[2], other[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, armed), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, other), 0);
  const int number = armed[0];
  const int armed_ref = ::dup(number);  // the test's own view of the armed socket
  ASSERT_GE(armed_ref, 0);
  std::promise<void> firing;
  auto fired = firing.get_future();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  const auto id = bound.arm(number, deadline, [&] { firing.set_value(); });
  // The library closes the fd and the number goes to another socket (dup2 does both at once).
  ASSERT_EQ(::dup2(other[0], number), number);
  ::close(other[0]);
  ASSERT_EQ(fired.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(bound.disarm(id));  // waits for the shutdown to be done
  EXPECT_EQ(::send(number, "x", 1, MSG_NOSIGNAL), 1)
      << "the socket that reused the armed fd number was shut down";
  char c = 0;
  EXPECT_EQ(::recv(other[1], &c, 1, MSG_DONTWAIT), 1) << "the reused number's socket lost data";
  EXPECT_EQ(::send(armed_ref, "y", 1, MSG_NOSIGNAL), -1) << "the armed socket was not shut down";
  for (const int fd : {number, other[1], armed_ref, armed[1]}) ::close(fd);
}

// M5 (review my): a watch whose socket lives on under another number (a fork's child, a
// deadline's duplicate) after its own number was closed and reused reports its hang-up to
// a monitor that forgot it; that event must not keep the monitor thread busy.
TEST(MysqlFdMonitor, AForgottenWatchDoesNotSpinTheMonitor) {
  int a[2], b[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
  const int keep = ::dup(a[0]);  // keeps A's socket alive after its number is reused
  ASSERT_GE(keep, 0);
  std::atomic<int> a_calls{0};
  std::promise<void> b_hung_up;
  FdMonitor monitor;  // after what its callbacks touch: its thread is joined first
  ASSERT_TRUE(monitor.watch(a[0], [&] { ++a_calls; }));
  ASSERT_EQ(::dup2(b[0], a[0]), a[0]);  // A's number now names B's socket
  ::close(b[0]);
  ASSERT_TRUE(monitor.watch(a[0], [&] { b_hung_up.set_value(); }));  // forgets A's watch
  ::close(a[1]);  // A hangs up: its forgotten registration reports, level-triggered
  const auto cpu = [] {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
  };
  // Absence of work can only be shown over a window: an idle monitor uses ~0 ms of it, a
  // spinning one most of a core.
  const auto cpu0 = cpu();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto used = std::chrono::duration_cast<std::chrono::milliseconds>(cpu() - cpu0);
  EXPECT_LT(used.count(), 100) << "the monitor thread spun on a forgotten watch's hang-up";
  EXPECT_EQ(a_calls.load(), 0) << "a forgotten watch's callback ran";
  ::close(b[1]);  // the watch of the number's new socket still works
  EXPECT_EQ(b_hung_up.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  for (const int fd : {a[0], keep}) ::close(fd);
}

TEST(MysqlWaiterThreads, AFinishedWaitsThreadTakesTheNextWait) {
  WaiterThreads threads(std::chrono::seconds(5));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread::id> ran;
  auto job = [&] {
    std::lock_guard lock(mu);
    ran.push_back(std::this_thread::get_id());
    cv.notify_all();
  };
  threads.run(job);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (threads.idle() != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(threads.idle(), 1u) << "the thread did not park";
  threads.run(job);
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return ran.size() == 2; }));
  EXPECT_EQ(ran[0], ran[1]) << "a second thread was started while one was parked";
}

// A granted wait wakes its caller, which often runs before the wait's thread has parked and
// asks for its next wait at once: the finishing thread takes it (a thread was started for
// nearly every contended acquire: 13,046 thread starts in 5 s of the bench's hand-offs).
TEST(MysqlWaiterThreads, AFinishingThreadTakesTheNextWait) {
  WaiterThreads threads(std::chrono::seconds(5));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread::id> ran;
  bool handed_over = false;
  threads.run([&] {
    WaiterThreads::finishing();
    {
      std::lock_guard lock(mu);
      ran.push_back(std::this_thread::get_id());
      handed_over = true;
      cv.notify_all();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // preempted before parking
  });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return handed_over; }));
  }
  threads.run([&] {
    std::lock_guard lock(mu);
    ran.push_back(std::this_thread::get_id());
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return ran.size() == 2; }));
  EXPECT_EQ(ran[0], ran[1]) << "a thread was started while the finishing one was about to park";
}

TEST(MysqlWaiterThreads, ParkedThreadsExitWhenIdle) {
  WaiterThreads threads(std::chrono::milliseconds(20));
  std::atomic<bool> done{false};
  threads.run([&] { done = true; });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(threads.idle(), 0u);
}

}  // namespace
}  // namespace dlock::mysql
