#include "options.h"

#include <algorithm>
#include <charconv>

#include "dlock/duration.h"
#include "dlock/error.h"

namespace dlock::redis {
namespace {

// Unread parameters' values are not shown: one may be a password (pw=).
[[noreturn]] void bad(const UriParams& params, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, what + " in " + params.redacted());
}

std::uint32_t parse_db(const UriParams& params, std::string_view text) {
  std::uint32_t db = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, db);
  if (text.empty() || ec != std::errc{} || ptr != end || db > 1'000'000) {
    bad(params, "the database must be a number (e.g. /0), got \"" + std::string(text) + "\"");
  }
  return db;
}

}  // namespace

RedisOptions parse_options(const Uri& uri) {
  RedisOptions o;
  // A user without a password is refused below, and is most likely a password written
  // without its colon (redis://secret@host): messages show it as ***.
  Uri shown = uri;
  if (!shown.user.empty() && !shown.password) shown.user = "***";
  UriParams params(shown);
  if (uri.scheme == "redis+unix") {
    if (!uri.hosts.empty() && !(uri.hosts.size() == 1 && uri.hosts[0].host.empty())) {
      bad(params, "redis+unix:// takes no host (write redis+unix:///path/to/socket)");
    }
    if (uri.path.empty() || uri.path == "/") bad(params, "redis+unix:// needs a socket path");
    o.unix_path = uri.path;
    if (auto db = params.take_string("db")) o.db = parse_db(params, *db);
    o.where = "redis unix:" + o.unix_path;
  } else {
    if (uri.hosts.empty() || uri.hosts[0].host.empty()) bad(params, "redis:// needs a host");
    if (uri.hosts.size() > 1) bad(params, "redis:// takes one host (no cluster or sentinel support)");
    o.host = uri.hosts[0].host;
    if (uri.hosts[0].port != 0) o.port = uri.hosts[0].port;
    if (!uri.path.empty() && uri.path != "/") o.db = parse_db(params, std::string_view(uri.path).substr(1));
    const bool v6 = o.host.find(':') != std::string::npos;
    o.where = "redis " + (v6 ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  }
  o.user = uri.user;
  o.password = uri.password;
  if (!o.user.empty() && !o.password) bad(params, "a Redis user needs a password (user:password@)");

  if (auto prefix = params.take_string("prefix")) {
    // Every key is the prefix and something; without one the data-loss marker would be the
    // bare key "epoch", which another application may use (dlock would take its value for
    // data loss, pause, and overwrite it).
    if (prefix->empty()) {
      bad(params, "prefix must not be empty (it keeps dlock's keys apart from the database's other "
               "keys: the data-loss marker would be the bare key \"epoch\"); leave prefix= out for "
               "the default dlock:");
    }
    if (prefix->find_first_of("{}") != std::string::npos) {
      bad(params, "prefix must not contain '{' or '}' (they would break the keys' hash tag)");
    }
    if (prefix->size() > 256) bad(params, "prefix is longer than 256 bytes");
    o.prefix = *prefix;
  }
  if (auto d = params.take_duration("connect_timeout")) o.connect_timeout = *d;
  if (auto d = params.take_duration("command_timeout")) o.command_timeout = *d;
  if (auto n = params.take_uint("pool", 1, 1024)) o.pool = static_cast<std::size_t>(*n);
  if (auto d = params.take_duration("lease")) o.lease = *d;
  // A dead waiter must not hold up the queue longer than a dead holder holds the lock.
  if (auto d = params.take_duration("fair_heartbeat")) {
    if (*d > o.lease / 2) {
      bad(params, "fair_heartbeat (" + std::to_string(d->count()) + "ms) must be at most lease/2 (" +
                   std::to_string((o.lease / 2).count()) + "ms)");
    }
    o.fair_heartbeat = *d;
  } else {
    o.fair_heartbeat = std::min(o.fair_heartbeat, o.lease / 2);
  }
  if (auto allow = params.take_bool("allow_eviction")) o.allow_eviction = *allow;
  if (auto grace = params.take_string("restart_grace")) {
    try {
      o.restart_grace = (*grace == "0" || *grace == "off") ? std::chrono::milliseconds(0)
                                                           : parse_duration(*grace);
    } catch (const Error& e) {
      bad(params, "restart_grace: " + e.message());
    }
  }
  if (o.lease < std::chrono::milliseconds(30)) bad(params, "lease must be at least 30ms");
  if (o.fair_heartbeat < std::chrono::milliseconds(30)) bad(params, "fair_heartbeat must be at least 30ms");
  params.finish();
  return o;
}

}  // namespace dlock::redis
