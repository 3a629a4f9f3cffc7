// Integration tests of what a user gets wrong or what the server refuses: passwords,
// databases, pg_hba, closed ports. Clear codes, no password printed.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "dlock/error.h"
#include "dlock/open.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A TCP socket bound to a free port on 127.0.0.1 (not listening); `port` gets its number.
// Returns -1 if it cannot.
int loopback_socket(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

// Opens `uri` and takes a lock; returns the error it threw (fails the test if none).
Error failure_of(const std::string& uri) {
  try {
    auto p = dlock::open(uri);
    (void)p->try_lock("x");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << uri << " worked";
  return Error(ErrorCode::internal, "no error");
}

void make_password_role() {
  test::admin(
      "DO $$ BEGIN CREATE ROLE dlock_pw LOGIN PASSWORD 'right-pw'; "
      "EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  test::admin("ALTER ROLE dlock_pw PASSWORD 'right-pw'");
  (void)dlock::open(test::uri_as("", "application_name=setup"));  // creates the fence table
  test::admin("GRANT ALL ON TABLE dlock_fence TO dlock_pw");
  test::admin("GRANT UPDATE ON SEQUENCE dlock_fence_token TO dlock_pw");
}

TEST(PgErrors, WrongPasswordIsInvalidArgumentWithoutThePassword) {
  make_password_role();
  for (const auto& uri : {test::uri_as("dlock_pw:wrong-pw", "create_tables=false"),
                          test::uri_as("dlock_pw", "password=wrong-pw&create_tables=false")}) {
    const Error e = failure_of(uri);
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(e.message().find("authentication failed"), std::string::npos) << e.what();
    EXPECT_EQ(e.message().find("wrong-pw"), std::string::npos) << e.what();
  }
  auto p = dlock::open(test::uri_as("dlock_pw:right-pw", "create_tables=false"));
  EXPECT_EQ(p->uri().find("right-pw"), std::string::npos) << p->uri();
  auto l = p->try_lock("pw-works");
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->release());
  auto q = dlock::open(test::uri_as("dlock_pw", "password=right-pw&create_tables=false"));
  EXPECT_EQ(q->uri().find("right-pw"), std::string::npos) << q->uri();
}

TEST(PgErrors, UnknownDatabaseIsInvalidArgument) {
  std::string uri = test::uri_as("", "");
  uri = uri.substr(0, uri.rfind('/')) + "/no_such_db_here";
  const Error e = failure_of(uri);
  EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
  EXPECT_NE(e.message().find("does not exist"), std::string::npos) << e.what();
}

TEST(PgErrors, PgHbaRejectIsInvalidArgument) {
  test::admin("DO $$ BEGIN CREATE ROLE dlock_rejected LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  const Error e = failure_of(test::uri_as("dlock_rejected", ""));
  EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
  EXPECT_NE(e.message().find("pg_hba"), std::string::npos) << e.what();
}

TEST(PgErrors, ClosedPortIsUnavailableWithinTheConnectTimeout) {
  int port = 0;
  ::close(loopback_socket(port));  // a free port, closed
  const auto start = Clock::now();
  const Error e = failure_of("postgres://postgres@127.0.0.1:" + std::to_string(port) +
                             "/postgres?connect_timeout=500ms");
  EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(), 1000);
}

// With create_tables=true (the default) an open needs no CREATE privilege once the tables
// exist: the grants README.md, "Privileges", lists for each mode are enough.
TEST(PgErrors, OpenNeedsNoCreatePrivilegeOnceTheTablesExist) {
  test::admin("DO $$ BEGIN CREATE ROLE dlock_nocreate LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  // A schema of its own, dropped at the end: other tests count the dlock_fence tables.
  test::admin("DROP SCHEMA IF EXISTS dlock_nocreate_s CASCADE");
  test::admin("CREATE SCHEMA dlock_nocreate_s");
  test::admin("GRANT USAGE ON SCHEMA dlock_nocreate_s TO dlock_nocreate");
  for (const std::string mode : {"advisory", "lease"}) {
    (void)dlock::open(test::uri_as("", "schema=dlock_nocreate_s&application_name=setup&mode=" + mode));
  }
  test::admin("GRANT SELECT, INSERT ON dlock_nocreate_s.dlock_fence TO dlock_nocreate");
  test::admin("GRANT UPDATE ON SEQUENCE dlock_nocreate_s.dlock_fence_token TO dlock_nocreate");
  test::admin("GRANT SELECT, INSERT, UPDATE ON dlock_nocreate_s.dlock_lease TO dlock_nocreate");
  ASSERT_EQ(test::admin("SELECT has_schema_privilege('dlock_nocreate', 'dlock_nocreate_s', 'CREATE')")[0][0], "f");
  for (const std::string mode : {"advisory", "lease"}) {
    try {
      auto p = dlock::open(test::uri_as("dlock_nocreate", "schema=dlock_nocreate_s&mode=" + mode));
      auto x = p->try_lock("no-create", Wait::for_duration(1s));
      ASSERT_TRUE(x) << mode;
      EXPECT_TRUE(x->release()) << mode;
      auto s = p->try_lock_shared("no-create", Wait::for_duration(1s));
      ASSERT_TRUE(s) << mode;
      EXPECT_TRUE(s->release()) << mode;
    } catch (const Error& e) {
      ADD_FAILURE() << mode << ": " << e.what();
    }
  }
  test::admin("DROP SCHEMA dlock_nocreate_s CASCADE");
}

// A retry cannot create a schema: invalid_argument naming it, in both modes.
TEST(PgErrors, MissingSchemaIsInvalidArgumentNamingIt) {
  for (const std::string mode : {"advisory", "lease"}) {
    const Error e = failure_of(test::uri_as("", "schema=no_such_schema_here&mode=" + mode));
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << mode << ": " << e.what();
    EXPECT_NE(e.message().find("no_such_schema_here"), std::string::npos) << mode << ": " << e.what();
  }
}

// A first host that accepts TCP but never answers (a stalled or half-dead server) costs
// connect_timeout, then the next host is tried, as libpq does: connect_timeout is per host.
TEST(PgErrors, SilentFirstHostFallsThroughToTheNextWithinConnectTimeout) {
  int port = 0;
  const int silent = loopback_socket(port);
  ASSERT_GE(silent, 0);
  ASSERT_EQ(::listen(silent, 16), 0);  // the kernel completes handshakes; nobody reads
  const std::string base = test::uri_as("", "connect_timeout=500ms");
  const auto at = base.find('@') + 1;
  const std::string uri = base.substr(0, at) + "127.0.0.1:" + std::to_string(port) + "," +
                          base.substr(at);
  const auto start = Clock::now();
  try {
    auto p = dlock::open(uri);
    auto l = p->try_lock("second-host");
    EXPECT_TRUE(l);
  } catch (const Error& e) {
    ADD_FAILURE() << uri << ": " << e.what();
  }
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(), 1500);
  ::close(silent);
}

}  // namespace
}  // namespace dlock::postgres
