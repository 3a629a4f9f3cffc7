#include <gtest/gtest.h>

#include "dlock/error.h"
#include "dlock/uri.h"

namespace dlock {
namespace {

ErrorCode code_of(std::string_view text, std::string* message = nullptr) {
  try {
    Uri::parse(text);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return ErrorCode::internal;  // parsed: the caller expected a failure
}

TEST(Uri, ParsesEveryPart) {
  Uri u = Uri::parse("Redis://alice:s%40cret@127.0.0.1:6380/2?prefix=app%3A&pool=4");
  EXPECT_EQ(u.scheme, "redis");
  EXPECT_EQ(u.user, "alice");
  ASSERT_TRUE(u.password);
  EXPECT_EQ(*u.password, "s@cret");
  ASSERT_EQ(u.hosts.size(), 1u);
  EXPECT_EQ(u.hosts[0].host, "127.0.0.1");
  EXPECT_EQ(u.hosts[0].port, 6380);
  EXPECT_EQ(u.path, "/2");
  ASSERT_EQ(u.params.size(), 2u);
  EXPECT_EQ(u.params[0], (std::pair<std::string, std::string>{"prefix", "app:"}));
  EXPECT_EQ(u.params[1], (std::pair<std::string, std::string>{"pool", "4"}));
}

TEST(Uri, MultiHostAuthorityIsSplitByHand) {
  Uri u = Uri::parse("zk://h1:2181,h2:2182,[::1]:2183/app/locks");
  ASSERT_EQ(u.hosts.size(), 3u);
  EXPECT_EQ(u.hosts[0].host, "h1");
  EXPECT_EQ(u.hosts[1].port, 2182);
  EXPECT_EQ(u.hosts[2].host, "::1");
  EXPECT_EQ(u.hosts[2].port, 2183);
  EXPECT_EQ(u.path, "/app/locks");
}

TEST(Uri, EmbeddedSchemesHaveNoHost) {
  EXPECT_TRUE(Uri::parse("mem://").hosts.empty());
  Uri f = Uri::parse("file:///var/lib/app/locks");
  EXPECT_TRUE(f.hosts.empty());
  EXPECT_EQ(f.path, "/var/lib/app/locks");
}

TEST(Uri, MalformedInputIsInvalidArgumentNamingTheProblem) {
  std::string msg;
  EXPECT_EQ(code_of("127.0.0.1:6379", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("no scheme"), std::string::npos) << msg;
  EXPECT_EQ(code_of("redis://h:0", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("bad port"), std::string::npos) << msg;
  EXPECT_EQ(code_of("redis://h:65536", &msg), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of("redis://h:6x79", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("bad port '6x79'"), std::string::npos) << msg;
  EXPECT_EQ(code_of("redis://127.0.0.1:0x10/0", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("bad port '0x10'"), std::string::npos) << msg;
  EXPECT_EQ(code_of("zk://h1:1,h2:z/x", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("bad port 'z'"), std::string::npos) << msg;
  EXPECT_EQ(Uri::parse("redis://[::1]:6379").hosts[0].port, 6379);
  EXPECT_EQ(code_of("zk://h1:1,,h2:2/x", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("empty host"), std::string::npos) << msg;
  EXPECT_EQ(code_of("redis://h/?a=1&a=2", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  EXPECT_EQ(code_of("redis://h/%zz", &msg), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of("redis://h/#frag", &msg), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of(std::string("redis://h/\0x", 11), &msg), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of("", &msg), ErrorCode::invalid_argument);
}

TEST(Uri, PasswordNeverAppearsInMessagesOrRedactedForm) {
  const std::string secret = "hunter2-very-secret";
  for (std::string text : {"redis://u:" + secret + "@h:99999/0", "redis://u:" + secret + "@h:1/%zz",
                           "redis://u:" + secret + "@h:1/?a=1&a=1", "u:" + secret + "@h:1"}) {
    std::string msg;
    EXPECT_EQ(code_of(text, &msg), ErrorCode::invalid_argument) << text;
    EXPECT_EQ(msg.find(secret), std::string::npos) << msg;
  }
  Uri u = Uri::parse("redis://u:" + secret + "@h:1/0?password=" + secret + "&prefix=x");
  EXPECT_EQ(u.redacted().find(secret), std::string::npos) << u.redacted();
  EXPECT_EQ(u.redacted(), "redis://u:***@h:1/0?password=***&prefix=x");
  EXPECT_EQ(redact_uri("redis://u:" + secret + "@h:1"), "redis://u:***@h:1");
}

TEST(UriParams, ReadsTypedValuesAndRejectsUnknownKeys) {
  Uri u = Uri::parse("x://h/?lease=2s&fair=yes&pool=8&prefix=p&typo=1");
  UriParams p(u);
  EXPECT_EQ(p.take_duration("lease"), std::chrono::milliseconds(2000));
  EXPECT_EQ(p.take_bool("fair"), true);
  EXPECT_EQ(p.take_uint("pool", 1, 64), 8u);
  EXPECT_EQ(p.take_string("prefix"), "p");
  EXPECT_EQ(p.take_string("absent"), std::nullopt);
  try {
    p.finish();
    FAIL() << "unknown parameter accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("typo"), std::string::npos) << e.what();
  }
}

TEST(UriParams, BadValuesAreInvalidArgument) {
  Uri u = Uri::parse("x://h/?lease=5&pool=0&fair=maybe");
  UriParams p(u);
  EXPECT_THROW(p.take_duration("lease"), Error);
  EXPECT_THROW(p.take_uint("pool", 1, 64), Error);
  EXPECT_THROW(p.take_bool("fair"), Error);
}

}  // namespace
}  // namespace dlock
