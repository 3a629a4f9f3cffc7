#include "options.h"

#include <algorithm>
#include <cctype>

#include "dlock/duration.h"
#include "dlock/error.h"

namespace dlock::postgres {
namespace {

// Unread parameters' values are not shown: one may be a password (pw=).
[[noreturn]] void bad(const UriParams& params, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, what + " in " + params.redacted());
}

// Schema and table names go into SQL text (quoted), so only plain identifiers are taken.
std::string identifier(const UriParams& params, std::string_view key, std::string value) {
  const bool ok = !value.empty() && value.size() <= 63 &&
                  (std::isalpha(static_cast<unsigned char>(value[0])) || value[0] == '_') &&
                  std::all_of(value.begin(), value.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '_';
                  });
  if (!ok) {
    bad(params, std::string(key) + " must be a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 bytes)");
  }
  return value;
}

std::string host_text(const HostPort& h) {
  if (!h.host.empty() && h.host[0] == '/') return h.host;  // a unix socket directory
  const bool v6 = h.host.find(':') != std::string::npos;
  return v6 ? "[" + h.host + "]" : h.host;
}

}  // namespace

const std::vector<std::string>& passthrough_parameters() {
  static const std::vector<std::string> names = {"sslmode", "sslrootcert", "sslcert",
                                                 "sslkey", "sslcrl", "target_session_attrs",
                                                 "application_name"};
  return names;
}

PgOptions parse_options(const Uri& uri) {
  PgOptions o;
  UriParams params(uri);
  if (uri.hosts.empty()) bad(params, "postgres:// needs a host (write postgres://host[:port]/database)");
  std::string hosts, ports, where;
  for (std::size_t i = 0; i < uri.hosts.size(); ++i) {
    const auto& h = uri.hosts[i];
    if (h.host.empty()) bad(params, "empty host");
    const std::uint16_t port = h.port ? h.port : 5432;
    hosts += (i ? "," : "") + h.host;
    ports += (i ? "," : "") + std::to_string(port);
    where += (i ? "," : "") + host_text(h) + ":" + std::to_string(port);
  }
  o.conninfo.emplace_back("host", hosts);
  o.conninfo.emplace_back("port", ports);
  std::string db = uri.path.empty() ? "" : uri.path.substr(1);
  if (db.empty() || db.find('/') != std::string::npos) {
    bad(params, "postgres:// needs a database (write postgres://host[:port]/database)");
  }
  o.conninfo.emplace_back("dbname", db);
  if (!uri.user.empty()) o.conninfo.emplace_back("user", uri.user);
  std::optional<std::string> password = uri.password;
  if (auto p = params.take_string("password")) {
    if (password) bad(params, "the password is given twice (user:password@ and password=)");
    password = std::move(p);
  }
  if (password) o.conninfo.emplace_back("password", *password);
  o.where = "postgres " + where + "/" + db;

  // libpq rejects other values only when connecting, with a message that looks like an
  // unreachable server (unavailable: retried in vain); named here they are the URI's fault.
  const std::vector<std::pair<std::string, std::vector<std::string>>> enums = {
      {"sslmode", {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}},
      {"target_session_attrs", {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}},
  };
  for (const auto& name : passthrough_parameters()) {
    if (auto v = params.take_string(name)) {
      for (const auto& [enum_name, allowed] : enums) {
        if (name != enum_name || std::find(allowed.begin(), allowed.end(), *v) != allowed.end()) continue;
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        bad(params, name + " must be one of " + list + ", not '" + *v + "'");
      }
      if (name == "application_name") {
        o.application_name = *v;
      } else {
        o.conninfo.emplace_back(name, *v);
      }
    }
  }
  if (auto mode = params.take_string("mode")) {
    if (*mode == "advisory") {
      o.mode = Mode::advisory;
    } else if (*mode == "lease") {
      o.mode = Mode::lease;
      o.table = "dlock_lease";
    } else {
      bad(params, "mode must be advisory or lease, not '" + *mode + "'");
    }
  }
  if (auto prefix = params.take_string("prefix")) {
    if (prefix->size() > 256) bad(params, "prefix is longer than 256 bytes");
    o.prefix = *prefix;
  }
  if (auto s = params.take_string("schema")) o.schema = identifier(params, "schema", *s);
  if (auto t = params.take_string("table")) o.table = identifier(params, "table", *t);
  const auto advisory_only = [&](std::string_view key) {
    if (o.mode == Mode::lease) bad(params, std::string(key) + "= is for mode=advisory (lease rows neither hold a session nor wait in the server's lock queue)");
  };
  if (auto d = params.take_duration("session_timeout")) {
    advisory_only("session_timeout");
    o.session_timeout = *d;
  }
  if (auto chunk = params.take_string("wait_chunk")) {
    advisory_only("wait_chunk");
    try {
      o.wait_chunk = *chunk == "0" ? std::chrono::milliseconds(0) : parse_duration(*chunk);
    } catch (const Error& e) {
      bad(params, "wait_chunk: " + e.message());
    }
    if (o.wait_chunk.count() != 0 && o.wait_chunk < std::chrono::milliseconds(100)) {
      bad(params, "wait_chunk must be 0 (no chunks) or at least 100ms");
    }
  }
  if (auto d = params.take_duration("lease")) {
    if (o.mode != Mode::lease) bad(params, "lease= is for mode=lease (advisory locks live as long as the session)");
    o.lease = *d;
  }
  if (auto d = params.take_duration("connect_timeout")) o.connect_timeout = *d;
  if (auto d = params.take_duration("command_timeout")) o.command_timeout = *d;
  if (auto n = params.take_uint("pool", 2, 1024)) o.pool = static_cast<std::size_t>(*n);
  if (auto b = params.take_bool("create_tables")) o.create_tables = *b;
  if (o.session_timeout < std::chrono::seconds(1)) bad(params, "session_timeout must be at least 1s");
  if (o.lease < std::chrono::milliseconds(100)) bad(params, "lease must be at least 100ms");
  params.finish();
  return o;
}

}  // namespace dlock::postgres
