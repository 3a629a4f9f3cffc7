// A read-only target never grants: a hot standby (scripts/servers.sh start postgres_standby,
// DLOCK_TEST_POSTGRES_STANDBY_URI; unset, these tests fail) and a role whose transactions
// are read-only both give a clear `unavailable` at open; a multi-host URI with
// target_session_attrs=read-write lands on the primary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/uri.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

std::string host_port(const std::string& uri) {
  const Uri u = Uri::parse(uri);
  return u.hosts.at(0).host + ":" + std::to_string(u.hosts.at(0).port);
}

std::string standby_uri() {
  const char* v = std::getenv("DLOCK_TEST_POSTGRES_STANDBY_URI");
  if (v == nullptr || *v == '\0') {
    throw std::runtime_error("DLOCK_TEST_POSTGRES_STANDBY_URI not set (scripts/servers.sh start postgres_standby)");
  }
  return v;
}

// The error of opening `uri` and taking a lock; fails the test if a lock was granted.
Error failure_of(const std::string& uri) {
  try {
    auto p = dlock::open(uri);
    auto l = p->try_lock("never-granted");
    ADD_FAILURE() << "a read-only target " << (l ? "granted a lock" : "opened") << ": " << uri;
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorCode::internal, "no error");
}

TEST(PgStandby, HotStandbyIsUnavailableAndNeverGrants) {
  const auto tag = test::fresh_tag();
  const std::string base = "postgres://postgres@" + host_port(standby_uri()) + "/postgres?prefix=" + tag +
                           ":&application_name=" + tag + "&connect_timeout=1s&command_timeout=1s";
  for (const std::string extra : {"", "&create_tables=false", "&mode=lease", "&mode=lease&create_tables=false"}) {
    const Error e = failure_of(base + extra);
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << extra << ": " << e.what();
    EXPECT_NE(e.message().find("read-only hot standby"), std::string::npos) << extra << ": " << e.what();
    EXPECT_NE(e.message().find("target_session_attrs=read-write"), std::string::npos) << e.what();
  }
}

TEST(PgStandby, ReadOnlyTransactionsAreUnavailable) {
  test::admin("DO $$ BEGIN CREATE ROLE dlock_ro LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  test::admin("ALTER ROLE dlock_ro SET default_transaction_read_only = on");
  (void)dlock::open(test::uri_as("", "application_name=setup"));  // creates the fence table
  test::admin("GRANT ALL ON TABLE dlock_fence TO dlock_ro");
  test::admin("GRANT ALL ON SEQUENCE dlock_fence_token TO dlock_ro");
  const Error e = failure_of(test::uri_as("dlock_ro", "create_tables=false"));
  EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  EXPECT_NE(e.message().find("default_transaction_read_only"), std::string::npos) << e.what();
}

TEST(PgStandby, ReadWriteTargetPicksThePrimary) {
  const auto tag = test::fresh_tag();
  const std::string hosts = host_port(standby_uri()) + "," + host_port(test::base_uri());
  const std::string query = "prefix=" + tag + ":&application_name=" + tag;
  // The standby is listed first: libpq skips it only when told to.
  auto p = dlock::open("postgres://postgres@" + hosts + "/postgres?target_session_attrs=read-write&" + query);
  auto l = p->try_lock("primary-only");
  ASSERT_TRUE(l);
  EXPECT_EQ(test::advisory_locks_of(tag, true), 1) << "the lock is not on the primary";
  EXPECT_TRUE(l->release());
  const Error e = failure_of("postgres://postgres@" + hosts + "/postgres?" + query);
  EXPECT_EQ(e.code(), ErrorCode::unavailable) << "without target_session_attrs: " << e.what();
}

}  // namespace
}  // namespace dlock::postgres
