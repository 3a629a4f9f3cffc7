// Unit tests of the postgres backend's parts that need no server: URI parsing, key hashing,
// SQL text, session settings, pooler detection.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "connection.h"
#include "dlock/error.h"
#include "dlock/uri.h"
#include "keys.h"
#include "options.h"
#include "pg_backend.h"
#include "sql.h"

namespace dlock::postgres {
namespace {

using namespace std::chrono_literals;

PgOptions parse(const std::string& text) { return parse_options(Uri::parse(text)); }

std::string conninfo(const PgOptions& o, const std::string& key) {
  for (const auto& [k, v] : o.conninfo) {
    if (k == key) return v;
  }
  return "<none>";
}

ErrorCode code_of(const std::string& text, std::string* message = nullptr) {
  try {
    (void)parse(text);
  } catch (const Error& e) {
    if (message) *message = e.message();
    return e.code();
  }
  ADD_FAILURE() << text << " parsed";
  return ErrorCode::internal;
}

TEST(PgOptions, Defaults) {
  const auto o = parse("postgres://alice@db.example:6543/app");
  EXPECT_EQ(o.mode, Mode::advisory);
  EXPECT_EQ(conninfo(o, "host"), "db.example");
  EXPECT_EQ(conninfo(o, "port"), "6543");
  EXPECT_EQ(conninfo(o, "dbname"), "app");
  EXPECT_EQ(conninfo(o, "user"), "alice");
  EXPECT_EQ(conninfo(o, "password"), "<none>");
  EXPECT_EQ(o.prefix, "dlock:");
  EXPECT_EQ(o.schema, "public");
  EXPECT_EQ(o.table, "dlock_fence");
  EXPECT_EQ(o.session_timeout, 10s);
  EXPECT_EQ(o.wait_chunk, 10s);
  EXPECT_EQ(o.connect_timeout, 2s);
  EXPECT_EQ(o.command_timeout, 2s);
  EXPECT_EQ(o.pool, 16u);
  EXPECT_TRUE(o.create_tables);
  EXPECT_EQ(o.where, "postgres db.example:6543/app");
}

TEST(PgOptions, BothSchemesAndDefaultPort) {
  EXPECT_EQ(conninfo(parse("postgresql://h/d"), "port"), "5432");
  EXPECT_EQ(conninfo(parse("postgres://h/d"), "port"), "5432");
}

TEST(PgOptions, MultiHostKeepsEveryHostAndPort) {
  const auto o = parse("postgres://u@h1:5433,h2,[::1]:5435/db?target_session_attrs=read-write");
  EXPECT_EQ(conninfo(o, "host"), "h1,h2,::1");
  EXPECT_EQ(conninfo(o, "port"), "5433,5432,5435");
  EXPECT_EQ(conninfo(o, "target_session_attrs"), "read-write");
  EXPECT_EQ(o.where, "postgres h1:5433,h2:5432,[::1]:5435/db");
}

TEST(PgOptions, UnixSocketDirectoryAsEncodedHost) {
  const auto o = parse("postgres://u@%2Fvar%2Frun%2Fpostgresql/db");
  EXPECT_EQ(conninfo(o, "host"), "/var/run/postgresql");
}

TEST(PgOptions, WhitelistedLibpqParametersPassThrough) {
  const auto o = parse(
      "postgres://u@h/d?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=/c.pem&sslkey=/k.pem"
      "&sslcrl=/crl.pem&application_name=app1");
  EXPECT_EQ(conninfo(o, "sslmode"), "verify-full");
  EXPECT_EQ(conninfo(o, "sslrootcert"), "/ca.pem");
  EXPECT_EQ(conninfo(o, "sslcert"), "/c.pem");
  EXPECT_EQ(conninfo(o, "sslkey"), "/k.pem");
  EXPECT_EQ(conninfo(o, "sslcrl"), "/crl.pem");
  EXPECT_EQ(o.application_name, "app1");
}

// An unknown parameter may be a password under another name (pw=): named, never shown,
// also when another parameter is the one at fault.
TEST(PgOptions, AnUnknownParametersValueIsNeverShown) {
  std::string message;
  EXPECT_EQ(code_of("postgres://u@h/d?pw=hunter2", &message), ErrorCode::invalid_argument);
  EXPECT_NE(message.find("pw"), std::string::npos) << message;
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  for (const std::string& query : {std::string("pw=hunter2&mode=bogus"), "pw=hunter2&prefix=" + std::string(257, 'p'),
                                   std::string("pw=hunter2&schema=a-b"), std::string("pw=hunter2&sslmode=sometimes")}) {
    EXPECT_EQ(code_of("postgres://u@h/d?" + query, &message), ErrorCode::invalid_argument) << query;
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

TEST(PgOptions, DlockParameters) {
  const auto o = parse(
      "postgres://u@h/d?prefix=p1&schema=locks&table=fence_2&session_timeout=3s&wait_chunk=0"
      "&connect_timeout=500ms&command_timeout=750ms&pool=4&create_tables=false");
  EXPECT_EQ(o.prefix, "p1");
  EXPECT_EQ(o.schema, "locks");
  EXPECT_EQ(o.table, "fence_2");
  EXPECT_EQ(o.session_timeout, 3s);
  EXPECT_EQ(o.wait_chunk, 0ms);
  EXPECT_EQ(o.connect_timeout, 500ms);
  EXPECT_EQ(o.command_timeout, 750ms);
  EXPECT_EQ(o.pool, 4u);
  EXPECT_FALSE(o.create_tables);
  EXPECT_EQ(parse("postgres://u@h/d?mode=lease").table, "dlock_lease");
}

TEST(PgOptions, PasswordFromUserinfoOrParameterNeverPrinted) {
  EXPECT_EQ(conninfo(parse("postgres://u:s3cret@h/d"), "password"), "s3cret");
  EXPECT_EQ(conninfo(parse("postgres://u@h/d?password=s3cret"), "password"), "s3cret");
  for (const std::string uri : {"postgres://u:s3cret@h/d?bogus=1", "postgres://u@h/d?password=s3cret&bogus=1",
                                "postgres://u:s3cret@h/d?mode=x", "postgres://u@h/d?password=s3cret&pool=0"}) {
    std::string message;
    EXPECT_EQ(code_of(uri, &message), ErrorCode::invalid_argument) << uri;
    EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
  }
  EXPECT_EQ(parse("postgres://u:s3cret@h/d").where.find("s3cret"), std::string::npos);
}

TEST(PgOptions, RejectsWhatIsWrongNamingIt) {
  const std::pair<std::string, std::string> cases[] = {
      {"postgres://h", "database"},
      {"postgres://h/", "database"},
      {"postgres:///d", "host"},
      {"postgres://h/d?bogus=1", "bogus"},
      {"postgres://h/d?options=-c%20x%3D1", "options"},          // not whitelisted
      {"postgres://h/d?sslpassword=x", "sslpassword"},
      {"postgres://h/d?mode=row", "mode"},
      {"postgres://h/d?schema=a;drop", "schema"},
      {"postgres://h/d?table=t%22x", "table"},
      {"postgres://h/d?table=1abc", "table"},
      {"postgres://h/d?session_timeout=500ms", "session_timeout"},
      {"postgres://h/d?session_timeout=fast", "session_timeout"},
      {"postgres://h/d?wait_chunk=10ms", "wait_chunk"},
      {"postgres://h/d?pool=1", "pool"},
      {"postgres://h/d?create_tables=maybe", "create_tables"},
      {"postgres://h/d?lease=5s", "lease"},
      // Advisory-only settings that lease mode would ignore: refused, not silently dropped.
      {"postgres://h/d?mode=lease&session_timeout=5s", "session_timeout"},
      {"postgres://h/d?mode=lease&wait_chunk=1s", "wait_chunk"},
      {"postgres://u:p@h/d?password=q", "password"},
      {"postgres://h/d?prefix=" + std::string(300, 'x'), "prefix"},
      {"postgres://h/d?sslmode=bogus", "sslmode"},  // libpq's own check would look like a dead server
      {"postgres://h/d?target_session_attrs=bogus", "target_session_attrs"},
  };
  for (const auto& [uri, word] : cases) {
    std::string message;
    EXPECT_EQ(code_of(uri, &message), ErrorCode::invalid_argument) << uri;
    EXPECT_NE(message.find(word), std::string::npos) << uri << " -> " << message;
  }
}

TEST(PgKeys, FirstEightBytesOfSha256BigEndian) {
  // python3: struct.unpack('>q', hashlib.sha256(b'dlock:\x00a').digest()[:8])
  EXPECT_EQ(advisory_key(key_identity("dlock:", "a"), 0), 3794526735886998674LL);
  EXPECT_EQ(advisory_key(key_identity("dlock:", "a"), 1), 7423669381656952338LL);
}

// Keys must never change between versions: two processes hashing one name differently
// would not exclude each other. Expected values from Python's hashlib:
//   struct.unpack('>q', sha256(identity + (b'\0' + bytes([i]) if i else b'')).digest()[:8])
TEST(PgKeys, KeysAndDigestsAreByteIdenticalToTheReference) {
  struct Case {
    std::string identity;
    std::int64_t k0, k1, k7;
    const char* hex16;
  };
  const std::vector<Case> cases = {
      {std::string("dlock:\0a", 8), 3794526735886998674LL, 7423669381656952338LL, -4987936425757771131LL,
       "34a8ddf647445c92"},
      {"", -2039914840885289964LL, -5470760304282554394LL, 3372503890236294484LL, "e3b0c44298fc1c14"},
      {std::string("p\0x\0y", 5), 7854971064486353441LL, 7476712371528960284LL, -1497629393061820324LL,
       "6d027690d3ae5a21"},
      {key_identity("dlock:", "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87"), -2075038009848042569LL,
       3649912688884902558LL, 3359946471519766029LL, "e333fbec8f92ebb7"},
      {key_identity("dlock:", std::string(4096, 'n')), 7860627420248633715LL, -5691481131027500199LL,
       8601551226577384528LL, "6d168efdc79d7173"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(sha256_key(c.identity, 0), c.k0) << c.identity.size();
    EXPECT_EQ(sha256_key(c.identity, 1), c.k1) << c.identity.size();
    EXPECT_EQ(sha256_key(c.identity, 7), c.k7) << c.identity.size();
    EXPECT_EQ(digest_hex16(c.identity), c.hex16) << c.identity.size();
  }
  EXPECT_EQ(to_hex(std::string("\x00\xff\x10", 3)), "00ff10");
}

TEST(PgKeys, IdentityKeepsPrefixAndNameApart) {
  EXPECT_EQ(key_identity("ab", "c"), std::string("ab\0c", 4));
  EXPECT_NE(key_identity("ab", "c"), key_identity("a", "bc"));
  EXPECT_NE(advisory_key(key_identity("ab", "c"), 0), advisory_key(key_identity("a", "bc"), 0));
  const std::string nul_name("x\0y", 3);
  EXPECT_NE(advisory_key(key_identity("p", nul_name), 0), advisory_key(key_identity("p", "x"), 0));
}

TEST(PgKeys, TestHookReplacesTheHash) {
  set_key_function_for_testing([](std::string_view, int index) -> std::int64_t { return 42 + index; });
  EXPECT_EQ(advisory_key("anything", 0), 42);
  EXPECT_EQ(advisory_key("anything", 2), 44);
  set_key_function_for_testing(nullptr);
  EXPECT_EQ(advisory_key(key_identity("dlock:", "a"), 0), 3794526735886998674LL);
}

TEST(PgSql, QuotedTableParametersOnlyAndOneLockCall) {
  const AdvisorySql sql("locks", "fence");
  EXPECT_NE(sql.create_table.find("\"locks\".\"fence\""), std::string::npos);
  EXPECT_NE(sql.create_table.find("CREATE SEQUENCE IF NOT EXISTS \"locks\".\"fence_token\""), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("PREPARE dlock_try_x(bigint)"), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("PREPARE dlock_claim(bigint, bytea)"), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("pg_try_advisory_lock_shared($1)"), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("pg_advisory_lock($1)::text = ''"), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("SELECT pg_advisory_unlock_shared($1)"), std::string::npos);
  // A cancel names the waiter's server process by a bound integer, nothing else.
  EXPECT_NE(sql.prepare_all.find("PREPARE dlock_cancel(bigint) AS SELECT pg_cancel_backend(pid) FROM "
                                 "pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock';"),
            std::string::npos);
  // A wait carries its own lock_timeout (the caller's deadline), for that statement only,
  // set in a subquery that runs before the lock call.
  EXPECT_NE(sql.prepare_all.find("PREPARE dlock_wait_x(bigint, text)"), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("PREPARE dlock_wait_s(bigint, text)"), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("(SELECT pg_advisory_lock($1)::text = '' AS got FROM (SELECT "
                                 "set_config('lock_timeout', $2, true) AS lt OFFSET 0) t OFFSET 0) l"),
            std::string::npos);
  // The lock function runs exactly once per statement; the token only after a grant.
  EXPECT_NE(sql.prepare_all.find(" AS got OFFSET 0) l"), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("CASE WHEN l.got THEN (SELECT nextval('\"locks\".\"fence_token\"'::regclass)"),
            std::string::npos);
  // The acquire path writes no row: the only INSERT is the claim's.
  const auto first_insert = sql.prepare_all.find("INSERT");
  EXPECT_EQ(sql.prepare_all.find("INSERT", first_insert + 1), std::string::npos);
  EXPECT_EQ(sql.prepare_all.find("UPDATE"), std::string::npos);
  // Every connection raises the sequence to the server clock under the exclusive bump lock.
  EXPECT_NE(sql.prepare_all.find("SELECT pg_advisory_xact_lock(1684828003, "), std::string::npos);
  EXPECT_NE(sql.prepare_all.find("GREATEST(nextval('\"locks\".\"fence_token\"'::regclass), (extract(epoch FROM clock_timestamp())"),
            std::string::npos);
}

TEST(PgSql, TokenSequenceNameStaysAnIdentifier) {
  EXPECT_EQ(token_sequence("dlock_fence"), "dlock_fence_token");
  EXPECT_EQ(token_sequence(std::string(63, 'a')).size(), 63u);
}

TEST(PgSession, SettingsMakeSTheBound) {
  PgOptions o;
  o.session_timeout = 10s;
  o.wait_chunk = 3s;
  const std::string s = session_settings(o);
  EXPECT_NE(s.find("-c idle_session_timeout=10000"), std::string::npos) << s;
  EXPECT_NE(s.find("-c tcp_user_timeout=10000"), std::string::npos) << s;
  EXPECT_NE(s.find("-c tcp_keepalives_idle=5"), std::string::npos) << s;
  EXPECT_NE(s.find("-c tcp_keepalives_interval=1"), std::string::npos) << s;
  EXPECT_NE(s.find("-c tcp_keepalives_count=5"), std::string::npos) << s;
  EXPECT_NE(s.find("-c lock_timeout=3000"), std::string::npos) << s;
  EXPECT_NE(s.find("-c statement_timeout=0"), std::string::npos) << s;
  EXPECT_NE(s.find("-c synchronous_commit=off"), std::string::npos) << s;
  EXPECT_NE(s.find("-c client_connection_check_interval=100"), std::string::npos) << s;
}

TEST(PgPooler, DifferentPidsMeanATransactionPooler) {
  EXPECT_FALSE(transaction_pooler_detected(4711, 4711));
  EXPECT_TRUE(transaction_pooler_detected(4711, 4712));
}

}  // namespace
}  // namespace dlock::postgres
