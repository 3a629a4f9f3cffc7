// Unit tests of the redis backend's pure parts: URI options, name encoding, key layout,
// slots and the embedded scripts. No server needed.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "dlock/error.h"
#include "dlock/uri.h"
#include "keys.h"
#include "options.h"
#include "scripts.h"

namespace dlock::redis {
namespace {

using std::chrono::milliseconds;

RedisOptions parse(std::string_view text) { return parse_options(Uri::parse(text)); }

ErrorCode code_of(std::string_view text, std::string* message = nullptr) {
  try {
    parse(text);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << text << " parsed without error";
  return ErrorCode::internal;
}

TEST(RedisOptions, DefaultsForAPlainHost) {
  auto o = parse("redis://example.org");
  EXPECT_EQ(o.host, "example.org");
  EXPECT_EQ(o.port, 6379);
  EXPECT_EQ(o.db, 0u);
  EXPECT_EQ(o.prefix, "dlock:");
  EXPECT_FALSE(o.password);
  EXPECT_TRUE(o.user.empty());
  EXPECT_EQ(o.connect_timeout, milliseconds(2000));
  EXPECT_EQ(o.command_timeout, milliseconds(2000));
  EXPECT_EQ(o.pool, 8u);
  EXPECT_EQ(o.lease, milliseconds(30000));
  EXPECT_EQ(o.fair_heartbeat, milliseconds(3000));
  EXPECT_EQ(o.where, "redis example.org:6379");
}

TEST(RedisOptions, EveryParameter) {
  auto o = parse(
      "redis://app:s%40cret@10.0.0.1:7000/3?prefix=svc%3Alocks%3A&connect_timeout=250ms"
      "&command_timeout=1s&pool=4&lease=10s&fair_heartbeat=1500ms");
  EXPECT_EQ(o.host, "10.0.0.1");
  EXPECT_EQ(o.port, 7000);
  EXPECT_EQ(o.user, "app");
  ASSERT_TRUE(o.password);
  EXPECT_EQ(*o.password, "s@cret");
  EXPECT_EQ(o.db, 3u);
  EXPECT_EQ(o.prefix, "svc:locks:");
  EXPECT_EQ(o.connect_timeout, milliseconds(250));
  EXPECT_EQ(o.command_timeout, milliseconds(1000));
  EXPECT_EQ(o.pool, 4u);
  EXPECT_EQ(o.lease, milliseconds(10000));
  EXPECT_EQ(o.fair_heartbeat, milliseconds(1500));
  EXPECT_EQ(parse("redis://h?lease=2s").fair_heartbeat, milliseconds(1000));  // at most lease/2
  EXPECT_EQ(parse("redis://h?restart_grace=0").restart_grace, milliseconds(0));
  EXPECT_EQ(parse("redis://h?restart_grace=5s").restart_grace, milliseconds(5000));
  EXPECT_FALSE(parse("redis://h").restart_grace);  // the lease
}

TEST(RedisOptions, PasswordOnlyAndIpv6) {
  auto o = parse("redis://:pw@[::1]:6380/");
  EXPECT_TRUE(o.user.empty());
  EXPECT_EQ(o.password.value_or(""), "pw");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.db, 0u);
  EXPECT_EQ(o.where, "redis [::1]:6380");
}

TEST(RedisOptions, UnixSocket) {
  auto o = parse("redis+unix:///run/redis/redis.sock?db=2&prefix=x%3A");
  EXPECT_EQ(o.unix_path, "/run/redis/redis.sock");
  EXPECT_TRUE(o.host.empty());
  EXPECT_EQ(o.db, 2u);
  EXPECT_EQ(o.prefix, "x:");
  EXPECT_EQ(o.where, "redis unix:/run/redis/redis.sock");
  auto with_pw = parse("redis+unix://:pw@/tmp/r.sock");
  EXPECT_EQ(with_pw.password.value_or(""), "pw");
  EXPECT_EQ(with_pw.unix_path, "/tmp/r.sock");
}

TEST(RedisOptions, BadInputIsInvalidArgument) {
  for (const char* bad : {
           "redis://h?nope=1",               // unknown parameter
           "redis://h?pool=0",               // out of range
           "redis://h?pool=x",               //
           "redis://h?connect_timeout=5",    // no unit
           "redis://h?command_timeout=-1s",  //
           "redis://h/abc",                  // db not a number
           "redis://h/1/2",                  //
           "redis://h?prefix=a%7Bb",         // '{' would break the hash tag
           "redis://h?prefix=a%7Db",         // '}'
           "redis://h1,h2",                  // several hosts
           "redis:///0",                     // no host
           "redis://user@h",                 // user without password
           "redis://h?db=1",                 // db is the path for TCP
           "redis+unix://",                  // no socket path
           "redis+unix://host/tmp/s.sock",   // a host for a unix socket
           "redis://h?lease=10ms",           // too short to renew
           "redis://h?restart_grace=soon",   // not a duration
       }) {
    EXPECT_EQ(code_of(bad), ErrorCode::invalid_argument) << bad;
  }
}

TEST(RedisOptions, AnEmptyPrefixIsRefused) {
  // Without a prefix the data-loss marker is the bare key "epoch": another application's
  // key, which dlock would read as data loss and overwrite.
  std::string message;
  EXPECT_EQ(code_of("redis://h?prefix=", &message), ErrorCode::invalid_argument);
  EXPECT_NE(message.find("prefix"), std::string::npos) << message;
  EXPECT_NE(message.find("empty"), std::string::npos) << message;
  EXPECT_EQ(parse("redis://h?prefix=a").prefix, "a");
}

TEST(RedisOptions, AHeartbeatLongerThanHalfTheLeaseIsRefused) {
  // A dead waiter must not hold up the queue longer than a dead holder holds the lock.
  std::string message;
  EXPECT_EQ(code_of("redis://h?lease=30ms&fair_heartbeat=1h", &message), ErrorCode::invalid_argument);
  EXPECT_NE(message.find("fair_heartbeat"), std::string::npos) << message;
  EXPECT_NE(message.find("lease/2"), std::string::npos) << message;
  EXPECT_EQ(code_of("redis://h?lease=10s&fair_heartbeat=5001ms"), ErrorCode::invalid_argument);
  EXPECT_EQ(parse("redis://h?lease=10s&fair_heartbeat=5s").fair_heartbeat, milliseconds(5000));
}

TEST(RedisOptions, EvictionIsRefusedUnlessAllowed) {
  EXPECT_FALSE(parse("redis://h").allow_eviction);
  EXPECT_TRUE(parse("redis://h?allow_eviction=true").allow_eviction);
  EXPECT_EQ(code_of("redis://h?allow_eviction=maybe"), ErrorCode::invalid_argument);
}

TEST(RedisOptions, MessagesNeverShowThePassword) {
  std::string message;
  EXPECT_EQ(code_of("redis://u:hunter2@h?nope=1", &message), ErrorCode::invalid_argument);
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  EXPECT_NE(message.find("nope"), std::string::npos) << message;
  EXPECT_EQ(code_of("redis://u:hunter2@h/xyz", &message), ErrorCode::invalid_argument);
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
}

// redis://secret@host is a common slip for redis://:secret@host. A user without a password
// is refused, so that "user" is most likely a password: no message shows it.
TEST(RedisOptions, AUserWithoutAPasswordIsNeverShown) {
  std::string message;
  for (const char* uri : {"redis://S3cr3tPw@127.0.0.1:17379", "redis://S3cr3tPw@h/xyz", "redis://S3cr3tPw@h?nope=1",
                          "redis://S3cr3tPw@h?lease=1ms"}) {
    EXPECT_EQ(code_of(uri, &message), ErrorCode::invalid_argument) << uri;
    EXPECT_EQ(message.find("S3cr3tPw"), std::string::npos) << message;
  }
  code_of("redis://S3cr3tPw@h", &message);
  EXPECT_NE(message.find("needs a password"), std::string::npos) << message;
}

// An unknown parameter may be a password under another name (pw=): named, never shown,
// also when another parameter is the one at fault.
TEST(RedisOptions, AnUnknownParametersValueIsNeverShown) {
  std::string message;
  EXPECT_EQ(code_of("redis://h?pw=hunter2", &message), ErrorCode::invalid_argument);
  EXPECT_NE(message.find("pw"), std::string::npos) << message;
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  for (const char* query : {"pw=hunter2&prefix=", "pw=hunter2&lease=10ms", "pw=hunter2&allow_eviction=maybe"}) {
    EXPECT_EQ(code_of(std::string("redis://h?") + query, &message), ErrorCode::invalid_argument) << query;
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

TEST(RedisKeys, EncodingKeepsPlainBytesAndEscapesTheRest) {
  EXPECT_EQ(encode_name("orders/42.a_b-c"), "orders/42.a_b-c");
  EXPECT_EQ(encode_name("a{b}c"), "a%7Bb%7Dc");
  EXPECT_EQ(encode_name("x:y z%"), "x%3Ay%20z%25");
  EXPECT_EQ(encode_name(std::string("\0\xff", 2)), "%00%FF");
}

TEST(RedisKeys, EncodingIsInjective) {
  // Names that a naive layout would confuse: escapes, separators, the suffixes' letters.
  const std::vector<std::string> names = {
      "a", "A", "a:r", "a}:r", "a%3Ar", "a:", "{a}", "a}", "{a", "a%7D", "%", "%25", "a b", "a%20b",
      std::string("a\0", 2), std::string("a\0b", 3), "a:c:0", "a}:c:0"};
  std::set<std::string> seen;
  for (const auto& n : names) {
    auto e = encode_name(n);
    EXPECT_TRUE(seen.insert(e).second) << "collision for " << e;
    EXPECT_EQ(e.find_first_of("{}: \r\n"), std::string::npos) << e;
  }
}

TEST(RedisKeys, EveryKeyOfALockSharesOneHashTag) {
  const LockKeys k("dlock:", "inv}{:ent:ory");
  EXPECT_EQ(k.hold, "dlock:{inv%7D%7B%3Aent%3Aory}");
  EXPECT_EQ(k.readers, k.hold + ":r");
  EXPECT_EQ(k.counter, k.hold + ":t");
  EXPECT_EQ(k.queue, k.hold + ":q");
  EXPECT_EQ(k.deadlines, k.hold + ":d");
  EXPECT_EQ(k.latch("r1"), k.hold + ":u:r1");
  const unsigned slot = hash_slot(k.hold);
  for (const auto* key : {&k.readers, &k.counter, &k.queue, &k.deadlines}) {
    EXPECT_EQ(hash_slot(*key), slot) << *key;
  }
  EXPECT_EQ(hash_slot(k.latch("abc")), slot);
}

TEST(RedisKeys, SlotsMatchRedisCluster) {
  // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
  EXPECT_EQ(hash_slot("foo"), 12182u);
  EXPECT_EQ(hash_slot("{user1000}.following"), hash_slot("{user1000}.followers"));
  EXPECT_EQ(hash_slot("123456789"), 0x31C3u & 16383u);
  EXPECT_EQ(hash_slot("foo{}{bar}"), hash_slot("foo{}{bar}"));  // empty tag: whole key hashed
  EXPECT_NE(hash_slot("a{x}"), hash_slot("a{y}"));
}

TEST(RedisScripts, AreEmbeddedFromTheLuaFiles) {
  for (auto s : {lua::acquire, lua::release, lua::extend, lua::abandon}) {
    EXPECT_GT(s.size(), 200u);
    EXPECT_NE(s.find("redis.call"), std::string_view::npos);
  }
  // The scripts that hand the lock over carry the queue prelude (lua/queue.lua).
  for (auto s : {lua::acquire, lua::release, lua::abandon}) {
    EXPECT_NE(s.find("local function grant_queued"), std::string_view::npos);
  }
}

}  // namespace
}  // namespace dlock::redis
