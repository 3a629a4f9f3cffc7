#include "options.h"

#include <algorithm>

#include "dlock/error.h"

namespace dlock::mysql {
namespace {

// Unread parameters' values are not shown: one may be a password (pw=).
[[noreturn]] void bad(const UriParams& params, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, what + " in " + params.redacted());
}

// Identifiers are spliced into DDL and statements, so they are restricted to a safe
// alphabet; 54 leaves room for the "_seq" suffix within MySQL's 64-character limit.
bool safe_identifier(const std::string& s, std::size_t max) {
  return !s.empty() && s.size() <= max && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

MysqlOptions parse_options(const Uri& uri) {
  MysqlOptions o;
  UriParams params(uri);
  if (uri.scheme == "mysql+unix") {
    if (!uri.hosts.empty() && !(uri.hosts.size() == 1 && uri.hosts[0].host.empty())) {
      bad(params, "mysql+unix:// takes no host (write mysql+unix:///path/to/mysqld.sock?db=name)");
    }
    if (uri.path.empty() || uri.path == "/") bad(params, "mysql+unix:// needs a socket path");
    o.unix_path = uri.path;
    if (auto db = params.take_string("db")) o.database = *db;
    o.where = "mysql unix:" + o.unix_path;
  } else {
    if (uri.hosts.empty() || uri.hosts[0].host.empty()) bad(params, uri.scheme + ":// needs a host");
    if (uri.hosts.size() > 1) bad(params, uri.scheme + ":// takes one host");
    o.host = uri.hosts[0].host;
    if (uri.hosts[0].port != 0) o.port = uri.hosts[0].port;
    if (uri.path.size() > 1) o.database = uri.path.substr(1);
    const bool v6 = o.host.find(':') != std::string::npos;
    o.where = "mysql " + (v6 ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  }
  if (o.database.empty()) {
    bad(params, "the database is missing (mysql://user@host/database, or ?db= for mysql+unix)");
  }
  if (!safe_identifier(o.database, 64)) {
    bad(params, "the database name must be 1..64 characters of [A-Za-z0-9_]");
  }
  o.where += "/" + o.database;
  o.user = uri.user;
  o.password = uri.password;
  if (o.user.empty()) bad(params, "a user is needed (mysql://user:password@host/database)");

  const auto table = params.take_string("table");
  if (table && !safe_identifier(*table, 54)) bad(params, "table must be 1..54 characters of [A-Za-z0-9_]");
  if (auto p = params.take_string("prefix")) {
    if (p->size() > 256) bad(params, "prefix is longer than 256 bytes");
    o.prefix = *p;
  }
  if (auto m = params.take_string("mode")) {
    if (*m == "row") {
      o.mode = Mode::row;
    } else if (*m == "lease") {
      o.mode = Mode::lease;
    } else {
      bad(params, "mode must be row or lease, got \"" + *m + "\"");
    }
  }
  // The two modes have different schemas, so different default tables.
  o.table = table ? *table : (o.mode == Mode::lease ? "dlock_lease" : "dlock_lock");
  if (auto d = params.take_duration("session_timeout")) o.session_timeout = *d;
  if (auto d = params.take_duration("connect_timeout")) o.connect_timeout = *d;
  if (auto d = params.take_duration("command_timeout")) o.command_timeout = *d;
  if (auto d = params.take_duration("wait_chunk")) {
    if (*d < std::chrono::seconds(1)) bad(params, "wait_chunk must be at least 1s (the server waits in whole seconds)");
    o.wait_chunk = std::chrono::floor<std::chrono::seconds>(*d);
  }
  if (auto n = params.take_uint("pool", 2, 4096)) o.pool = static_cast<std::size_t>(*n);
  if (auto b = params.take_bool("create_tables")) o.create_tables = *b;
  if (auto s = params.take_string("ssl_ca")) o.ssl_ca = *s;
  if (auto s = params.take_string("ssl_cert")) o.ssl_cert = *s;
  if (auto s = params.take_string("ssl_key")) o.ssl_key = *s;
  if (o.ssl_cert.empty() != o.ssl_key.empty()) bad(params, "ssl_cert and ssl_key go together");
  if (o.session_timeout < std::chrono::seconds(1)) {
    bad(params, "session_timeout must be at least 1s (the server's wait_timeout takes whole seconds)");
  }
  if (o.session_timeout > std::chrono::hours(24 * 365)) bad(params, "session_timeout is longer than a year");
  params.finish();
  return o;
}

}  // namespace dlock::mysql
