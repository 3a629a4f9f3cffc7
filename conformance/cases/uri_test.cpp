// Contract 11: clear failures. Malformed URIs are invalid arguments naming the problem;
// passwords never appear; a closed or silent port is "unavailable" in bounded time.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "framework/conformance_test.h"
#include "framework/tcp_proxy.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Uris);

namespace {

// A loopback port where nothing listens (bound, then closed).
std::uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Opens `uri` and takes a lock: the failure may come from either step.
void open_and_lock(const std::string& uri) {
  auto p = dlock::open(uri);
  (void)p->try_lock("conf-unreachable", Wait::for_duration(milliseconds(200)));
}

}  // namespace

TEST_P(Uris, UnknownSchemeNamesItself) {
  try {
    (void)dlock::open("nosuchdb://127.0.0.1:1/x");
    ADD_FAILURE() << "an unknown scheme opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.message().find("nosuchdb"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(ctx().scheme), std::string::npos)
        << "the message should list the compiled-in schemes: " << e.message();
  }
}

TEST_P(Uris, MalformedUrisAreInvalidArgumentsNamingTheProblem) {
  ASSERT_FALSE(ctx().malformed_uris.empty()) << "the registration lists no malformed URIs";
  for (const auto& bad : ctx().malformed_uris) {
    try {
      open_and_lock(bad.uri);
      ADD_FAILURE() << bad.uri << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << bad.uri << ": " << e.what();
      EXPECT_NE(e.message().find(bad.must_mention), std::string::npos)
          << bad.uri << ": the message should mention \"" << bad.must_mention << "\": " << e.message();
    }
  }
}

// Every place a password can sit in a URI, in URIs that parse and in malformed ones: no
// error message and no provider's uri() may show it (nor half of it, where an unencoded
// delimiter splits it).
TEST_P(Uris, PasswordNeverAppears) {
  const std::string a = "s3cr3tPw", b = "0rdTail";  // the password is a + one char + b
  const std::string s = ctx().scheme;
  const std::vector<std::string> forms = {
      s + "://user:" + a + b + "@127.0.0.1:1/?bogus=1",           // userinfo
      s + "://127.0.0.1:1/?password=" + a + b + "&bogus=1",       // ?password=
      s + "://127.0.0.1:1/?sentinel_password=" + a + b + "&bogus=1",  // any *pass* parameter
      s + "://127.0.0.1:1/?Secret=" + a + b + "&bogus=1",         // secret, any case
      s + "://user:" + a + "/" + b + "@127.0.0.1:1/",             // unencoded '/' in it
      s + "://user:" + a + "?" + b + "@127.0.0.1:1/",             // unencoded '?'
      s + "://user:" + a + "#" + b + "@127.0.0.1:1/",             // unencoded '#'
      s + "://user:" + a + "@" + b + "@127.0.0.1:1/",             // unencoded '@'
      s + "://user:" + a + b + "@127.0.0.1:99999/",               // malformed port
      s + "://user:" + a + b + "@127.0.0.1:1/%zz",                // malformed encoding
      s + "://user:" + a + b + "@[::1/",                          // malformed host
  };
  for (const auto& uri : forms) {
    SCOPED_TRACE(uri);
    try {
      auto p = dlock::open(uri);
      EXPECT_EQ(p->uri().find(a), std::string::npos) << "the password leaked: " << p->uri();
      EXPECT_EQ(p->uri().find(b), std::string::npos) << "the password leaked: " << p->uri();
      (void)p->try_lock("conf-unreachable", Wait::for_duration(milliseconds(200)));
    } catch (const std::exception& e) {
      EXPECT_EQ(std::string(e.what()).find(a), std::string::npos) << "the password leaked: " << e.what();
      EXPECT_EQ(std::string(e.what()).find(b), std::string::npos) << "the password leaked: " << e.what();
    }
  }
  auto p = open();
  EXPECT_EQ(p->uri().find(a), std::string::npos);
}

TEST_P(Uris, ClosedPortIsUnavailableWithinTheConnectTimeout) {
  DLOCK_REQUIRE_CLAIM(network_faults);
  ASSERT_TRUE(ctx().closed_port_uri);
  const auto start = Clock::now();
  try {
    open_and_lock(ctx().closed_port_uri(closed_port()));
    ADD_FAILURE() << "a closed port did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  EXPECT_LE(ms_since(start), (milliseconds(500) + tol()).count()) << "connect_timeout=500ms";
}

TEST_P(Uris, SilentServerIsUnavailableWithinTheTimeouts) {
  DLOCK_REQUIRE_CLAIM(network_faults);
  const auto server = env().server();
  ASSERT_TRUE(server);
  TcpProxy proxy(server->host, server->port);
  proxy.set_mode(TcpProxy::Mode::blackhole);  // accepts, never answers
  const auto start = Clock::now();
  try {
    open_and_lock(env().uri({.via_port = proxy.port()}));
    ADD_FAILURE() << "a server that never answers did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unavailable) << e.what();
  }
  // connect 500 ms + one command 500 ms (+ a retry at most).
  EXPECT_LE(ms_since(start), (milliseconds(1500) + tol()).count()) << "a silent server made a call hang";
}

}  // namespace dlock::conformance
