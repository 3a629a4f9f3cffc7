#include "options.h"

#include <arpa/inet.h>

#include <algorithm>

#include "dlock/error.h"
#include "errors.h"
#include "names.h"

namespace dlock::zookeeper {
namespace {

// The URI's own bytes are shown escaped: a refused prefix or chroot may hold any byte.
// Unread parameters' values are not shown: one may be a password (pw=).
[[noreturn]] void bad(const UriParams& params, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, printable(what + " in " + params.redacted()));
}


// One entry of the C client's connect string. It splits an entry at its last ':' and
// resolves the rest with getaddrinfo, which does not know "[::1]": an IPv6 literal goes in
// bare ("::1:2181"). `bracketed` keeps the brackets, for messages.
std::string host_port(const HostPort& hp, bool bracketed) {
  const bool v6 = hp.host.find(':') != std::string::npos;
  const std::string host = v6 && bracketed ? "[" + hp.host + "]" : hp.host;
  return host + ":" + std::to_string(hp.port ? hp.port : 2181);
}

// The C client splits its connect string "h1:p1,h2:p2/chroot" at ',' and at the first '/',
// and each entry at its last ':'. A host with one of those (percent-encoded in the URI), or
// with whitespace or control bytes, would add a server or a chroot nobody checked.
void check_host(const UriParams& params, const std::string& host) {
  const bool odd = std::any_of(host.begin(), host.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c <= 0x20 || c == 0x7f || c == '/' || c == ',';
  });
  if (odd) bad(params, "a host must not contain '/', ',', whitespace or control bytes");
  in6_addr v6{};
  if (host.find(':') != std::string::npos && inet_pton(AF_INET6, host.c_str(), &v6) != 1) {
    bad(params, "a host with ':' must be an IPv6 address in brackets (the port goes after it)");
  }
}

}  // namespace

ZkOptions parse_options(const Uri& uri) {
  UriParams params(uri);
  if (uri.scheme == "zks" || uri.scheme == "zookeeper+tls") {
    throw Error(ErrorCode::unsupported,
                "zks:// (TLS to ZooKeeper) is not supported: Debian's ZooKeeper C client is built "
                "without OpenSSL (no zookeeper_init_ssl); use zk:// on a trusted network or a TLS "
                "tunnel, in " + params.redacted());
  }
  ZkOptions o;
  if (uri.hosts.empty() || uri.hosts[0].host.empty()) bad(params, "zk:// needs at least one host");
  o.where = "zookeeper ";
  for (const auto& hp : uri.hosts) {
    if (hp.host.empty()) bad(params, "empty host in the host list");
    check_host(params, hp.host);
    if (!o.hosts.empty()) {
      o.hosts += ',';
      o.where += ',';
    }
    o.hosts += host_port(hp, false);
    o.where += host_port(hp, true);
  }

  o.user = uri.user;
  o.password = uri.password;
  if (!o.user.empty() && !o.password) bad(params, "a ZooKeeper digest user needs a password (user:password@)");
  if (o.user.empty() && o.password) bad(params, "a password needs a user (digest auth is user:password@)");
  if (o.user.find(':') != std::string::npos) bad(params, "a digest user must not contain ':'");

  if (!uri.path.empty() && uri.path != "/") {
    std::string_view p = uri.path;
    if (p.back() == '/') p.remove_suffix(1);
    std::string_view rest = p.substr(1);
    bool first = true;
    while (true) {
      const auto slash = rest.find('/');
      const std::string_view seg = rest.substr(0, slash);
      if (!valid_node_name(seg)) bad(params, "chroot \"" + std::string(p) + "\" is not a valid ZooKeeper path");
      if (first && seg == "zookeeper") bad(params, "chroot must not be under /zookeeper (the server's own tree)");
      first = false;
      if (slash == std::string_view::npos) break;
      rest = rest.substr(slash + 1);
    }
    o.chroot = std::string(p);
  }

  if (auto sasl = params.take_string("sasl")) {
    throw Error(ErrorCode::unsupported,
                "SASL is not supported: Debian's ZooKeeper C client is built without Cyrus SASL "
                "(no zookeeper_init_sasl); use digest auth (user:password@), in " + params.redacted());
  }
  if (auto prefix = params.take_string("prefix")) {
    if (!valid_node_name(*prefix)) {
      bad(params, "prefix must be one node name (no '/', not empty, \".\" or \"..\", no spaces, control bytes or characters ZooKeeper refuses in a path)");
    }
    if (o.chroot.empty() && *prefix == "zookeeper") bad(params, "prefix \"zookeeper\" is the server's own tree");
    if (prefix->size() > 256) bad(params, "prefix is longer than 256 bytes");
    o.prefix = *prefix;
  }
  if (auto d = params.take_duration("session_timeout")) o.session_timeout = *d;
  if (auto d = params.take_duration("connect_timeout")) o.connect_timeout = *d;
  if (auto d = params.take_duration("command_timeout")) o.command_timeout = *d;
  if (o.session_timeout < std::chrono::milliseconds(100)) bad(params, "session_timeout must be at least 100ms");
  if (o.session_timeout > std::chrono::hours(24)) bad(params, "session_timeout must be at most 24h");
  params.finish();
  return o;
}

}  // namespace dlock::zookeeper
