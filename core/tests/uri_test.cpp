#include <gtest/gtest.h>

#include <functional>

#include <string>
#include <vector>

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

// A parameter nobody reads may be a password under a name is_secret_param does not catch
// (pw=, JDBC/ODBC habits): no error message ever shows its value, only its name.
TEST(Uri, NoMessageShowsTheValueOfAnUnknownParameter) {
  const std::string pw = "hunter2";
  // Uri::parse knows no parameter yet.
  for (const std::string& text : {"redis://h:99999/0?pw=" + pw, "redis://h:1/%zz?pw=" + pw,
                                  "redis://h:1/0?pw=" + pw + "&a=1&a=2"}) {
    std::string msg;
    EXPECT_EQ(code_of(text, &msg), ErrorCode::invalid_argument) << text;
    EXPECT_EQ(msg.find(pw), std::string::npos) << msg;
  }
  const Uri u = Uri::parse("x://h/?pw=" + pw + "&n=abc&d=soon&b=maybe");
  const auto message_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  // A bad known parameter while an unknown one is still unread.
  std::string msg = message_of([&] { UriParams(u).take_uint("n", 0, 9); });
  EXPECT_NE(msg.find("abc"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(pw), std::string::npos) << msg;
  msg = message_of([&] { UriParams(u).take_duration("d"); });
  EXPECT_EQ(msg.find(pw), std::string::npos) << msg;
  msg = message_of([&] { UriParams(u).take_bool("b"); });
  EXPECT_EQ(msg.find(pw), std::string::npos) << msg;
  // The unknown parameter itself: named, its value not shown.
  msg = message_of([&] { UriParams(Uri::parse("x://h/?pw=" + pw)).finish(); });
  EXPECT_NE(msg.find("unknown parameter pw"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(pw), std::string::npos) << msg;
}

// Every way a password can sit in a URI, in a URI that parses and in one that does not.
TEST(Uri, NoFormOfPasswordAppearsInMessagesOrRedactedForms) {
  const std::string pw = "hunter2";
  // Each secret below is split by the character the URI grammar trips on; neither half
  // may be printed ("bad port 'hunter2'" would leak the first).
  const std::vector<std::string> bad_uris = {
      "redis://h:99999/0?password=" + pw,                  // parameter, bad port
      "redis://h:1/0?password=" + pw + "&a=1&a=2",         // parameter, repeated key
      "redis://h:1/%zz?sentinel_password=" + pw,           // any *pass* parameter
      "redis://h:1/%zz?PassWord=" + pw,                    // any case
      "redis://h:1/%zz?pass%77ord=" + pw,                  // percent-encoded name
      "redis://h:1/%zz?secret=" + pw + "&auth_token=" + pw,
      "redis://u:" + pw + "/xyzzy@h:1/0",                 // unencoded '/' in the password
      "redis://u:" + pw + "?xyzzy@h:1/0",                 // unencoded '?'
      "redis://u:" + pw + "#xyzzy@h:1/0",                 // unencoded '#'
      "redis://u:" + pw + "@xyzzy@h:1/0",                 // unencoded '@'
      "redis://u:ab@cd:" + pw + "/xyzzy@h:1/0",           // '@', ':' and '/' unencoded
      "mysql://u:ab@cd:" + pw + "/xyzzy@h:1/db",
      "redis://:" + pw + "/xyzzy@h:1/0",                  // no user
      "redis://u:" + pw + "@h:6x79/0",                    // malformed port
      "redis://u:" + pw + "@[::1/0",                      // malformed host
      "redis://u:" + pw + " xyzzy@h:1/0",                 // a space
      "u:" + pw + "@h:1",                                 // no scheme
  };
  for (const auto& text : bad_uris) {
    std::string msg;
    EXPECT_EQ(code_of(text, &msg), ErrorCode::invalid_argument) << text;
    EXPECT_EQ(msg.find(pw), std::string::npos) << msg;
    EXPECT_EQ(msg.find("xyzzy"), std::string::npos) << msg;
    EXPECT_EQ(redact_uri(text).find(pw), std::string::npos) << redact_uri(text);
    EXPECT_EQ(redact_uri(text).find("xyzzy"), std::string::npos) << redact_uri(text);
  }
  // URIs that parse: every secret parameter is masked, the rest kept.
  Uri u = Uri::parse("redis://u:" + pw + "@h:1/0?Password=" + pw + "&tls_pwd=" + pw + "&token=" + pw +
                     "&prefix=app");
  EXPECT_EQ(u.redacted(), "redis://u:***@h:1/0?Password=***&tls_pwd=***&token=***&prefix=app");
  EXPECT_EQ(redact_uri("redis://h:1/0?password=" + pw + "&prefix=app"), "redis://h:1/0?password=***&prefix=app");
  EXPECT_EQ(redact_uri("redis://u:p%2Fw@h:1/0"), "redis://u:***@h:1/0");
  // A value the parameter readers reject is quoted, unless it is a secret.
  Uri typed = Uri::parse("x://h/?secret_ms=" + pw + "&auth=" + pw + "&pool=many");
  UriParams params(typed);
  for (auto read : {+[](UriParams& p) { (void)p.take_duration("secret_ms"); },
                    +[](UriParams& p) { (void)p.take_bool("auth"); }}) {
    try {
      read(params);
      ADD_FAILURE() << "a bad value was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find(pw), std::string::npos) << e.what();
    }
  }
  try {
    (void)params.take_uint("pool", 1, 8);
    ADD_FAILURE() << "a bad number was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'many'"), std::string::npos) << "pool is no secret: " << e.what();
  }
}

TEST(Uri, AnAtSignAfterTheHostIsRefusedSayingWhatToEncode) {
  std::string msg;
  EXPECT_EQ(code_of("redis://h:1/0?client=me@example", &msg), ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("%40"), std::string::npos) << msg;
  EXPECT_EQ(Uri::parse("redis://h:1/0?client=me%40example").params[0].second, "me@example");
  EXPECT_EQ(Uri::parse("file:///var/lock/a@b").path, "/var/lock/a@b");  // no ':' before it: a path
}

// A percent-encoded NUL would cut the value short where a client library takes C strings:
// "prefix=a%00b" and "prefix=a%00c" one namespace, "user%00x" logged in as "user", a
// password with "%00..." accepted for its first part.
TEST(Uri, APercentEncodedNulIsRefusedWherever) {
  for (const std::string text : {"mysql://dlock%00x:pw@h:1/db", "mysql://dlock:pw%00x@h:1/db",
                                 "mysql://dlock:pw@h%00x:1/db", "mysql://dlock:pw@h:1/db%00x",
                                 "redis://h:1/0?prefix=a%00b", "redis://h:1/0?pre%00fix=a"}) {
    std::string msg;
    EXPECT_EQ(code_of(text, &msg), ErrorCode::invalid_argument) << text;
    EXPECT_NE(msg.find("%00"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("pw%00x"), std::string::npos) << "a password quoted: " << msg;
  }
  EXPECT_EQ(Uri::parse("redis://h:1/0?prefix=a%2500b").params[0].second, "a%00b");  // no NUL: kept
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

// redacted() is what a program hands on (dlock run's DLOCK_URI, ILockProvider::uri()): for a
// URI without a password or secret parameter it must parse back to the same Uri, whatever
// bytes its parts hold once decoded, or a nested user opens another lock service.
TEST(Uri, RedactedParsesBackToTheSameUri) {
  const std::string odd[] = {"has space", "pct%41", "q?x", "h#x", "a&b=c", "at@x", "co:lon", "sl/ash",
                             "plus+", "comma,x", "non-ascii-\xC3\xA9\xFF", "[br]", "semi;x", "til~de_.-"};
  auto same = [](const Uri& a, const Uri& b) {
    EXPECT_EQ(a.scheme, b.scheme);
    EXPECT_EQ(a.user, b.user);
    EXPECT_EQ(a.password, b.password);
    ASSERT_EQ(a.hosts.size(), b.hosts.size());
    for (std::size_t i = 0; i < a.hosts.size(); ++i) {
      EXPECT_EQ(a.hosts[i].host, b.hosts[i].host);
      EXPECT_EQ(a.hosts[i].port, b.hosts[i].port);
    }
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.params, b.params);
  };
  for (const std::string& o : odd) {
    SCOPED_TRACE(o);
    Uri u;
    u.scheme = "redis";
    u.user = "u" + o;
    u.hosts = {{"h" + o, 6379}, {"::1", 2}, {"10.0.0.1", 0}};
    u.path = "/dir/" + o + "/end";
    u.params = {{"k" + o, "v" + o}, {"prefix", o}};
    const std::string text = u.redacted();
    SCOPED_TRACE(text);
    Uri back;
    ASSERT_NO_THROW(back = Uri::parse(text));
    same(u, back);
    // file:// as dlock run hands it on: no host, the directory in the path.
    Uri f;
    f.scheme = "file";
    f.path = "/tmp/" + o;
    Uri fback;
    ASSERT_NO_THROW(fback = Uri::parse(f.redacted())) << f.redacted();
    same(f, fback);
    // The same through the text: parse, print, parse.
    EXPECT_EQ(Uri::parse(Uri::parse(f.redacted()).redacted()).path, f.path);
  }
  // The password and secret values stay masked, and the rest still parses back.
  Uri p = Uri::parse("redis://us%20er:pw@h/0?password=x&prefix=a%26b");
  EXPECT_EQ(p.redacted(), "redis://us%20er:***@h/0?password=***&prefix=a%26b");
  Uri pb = Uri::parse(p.redacted());
  EXPECT_EQ(pb.user, "us er");
  EXPECT_EQ(pb.params[1].second, "a&b");
}

TEST(Uri, UriParamsRedactedStillMasksUnreadValues) {
  UriParams params(Uri::parse("redis://h/0?pw=se%20cret&prefix=a%20b"));
  EXPECT_EQ(params.take_string("prefix"), "a b");
  EXPECT_EQ(params.redacted(), "redis://h/0?pw=***&prefix=a%20b");
}

}  // namespace
}  // namespace dlock
