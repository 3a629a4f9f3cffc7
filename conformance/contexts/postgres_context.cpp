// postgres://: the test server named by DLOCK_TEST_POSTGRES_URI (scripts/servers.sh start
// postgres), in two columns: `postgres` (advisory mode) and `postgres_lease` (mode=lease).
//
// Each case gets its own key prefix and application_name "conf-<pid>-<n>". Advisory: the
// saboteur terminates (pg_terminate_backend) the sessions of that application_name that hold
// the name's advisory key; the residue is every advisory lock, granted or awaited, held by a
// session of that application_name. Lease: the saboteur clears the name's row (keeping its
// token); the residue is every row of the prefix with a live owner or reader. The server is
// restarted through $DLOCK_SERVERS_SCRIPT.
#include <libpq-fe.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/uri.h"
#include "framework/backend_context.h"

namespace dlock::conformance {
namespace {

std::string base_uri() {
  const char* v = std::getenv("DLOCK_TEST_POSTGRES_URI");
  if (v == nullptr || *v == '\0') throw std::runtime_error("DLOCK_TEST_POSTGRES_URI not set");
  return v;
}

// The backend's key for candidate 0: the first 8 bytes of SHA-256(prefix ‖ 0x00 ‖ name),
// big-endian, as a signed bigint (backends/postgres/src/keys.cpp).
long long advisory_key(const std::string& prefix, std::string_view name) {
  std::string input = prefix;
  input.push_back('\0');
  input.append(name);
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), d);
  unsigned long long v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[i];
  return static_cast<long long>(v);
}

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};

class PostgresEnv final : public BackendEnv {
 public:
  explicit PostgresEnv(bool lease) : lease_(lease), base_(Uri::parse(base_uri())), raw_base_(base_uri()) {
    if (base_.hosts.empty()) throw std::runtime_error("DLOCK_TEST_POSTGRES_URI has no host");
    static std::atomic<int> counter{0};
    tag_ = "conf-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }

  std::string uri(const UriOptions& options) const override {
    std::string u = "postgres://";
    if (!base_.user.empty() || base_.password) {
      u += base_.user + (base_.password ? ":" + *base_.password : "") + "@";
    }
    u += base_.hosts[0].host + ":" + std::to_string(options.via_port ? *options.via_port : port());
    u += base_.path;
    u += "?prefix=" + tag_ + ":&application_name=" + tag_ + "&connect_timeout=500ms&command_timeout=500ms";
    u += lease_ ? "&mode=lease&lease=1s" : "&session_timeout=1s&wait_chunk=2s";
    return u;
  }

  void sabotage(std::string_view name) override {
    if (lease_) {
      auto r = query("WITH u AS (UPDATE dlock_lease SET owner = NULL, expires_at = NULL, readers = '{}' WHERE name = decode('" +
                     hex(tag_ + ":" + std::string(1, '\0') + std::string(name)) + "', 'hex') RETURNING 1) SELECT count(*) FROM u");
      if (std::atoi(PQgetvalue(r.get(), 0, 0)) == 0) throw std::runtime_error("postgres saboteur: no row for that name");
      return;
    }
    const long long key = advisory_key(tag_ + ":", name);
    auto r = query(
        "SELECT count(pg_terminate_backend(a.pid)) FROM pg_locks l JOIN pg_stat_activity a ON "
        "a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND "
        "((l.classid::bigint << 32) | l.objid::bigint) = " + std::to_string(key) +
        " AND a.application_name = '" + tag_ + "'");
    if (std::atoi(PQgetvalue(r.get(), 0, 0)) == 0) {
      throw std::runtime_error("postgres saboteur: no session of " + tag_ + " holds that name");
    }
  }

  std::vector<std::string> residue() const override {
    if (lease_) {
      auto r = query("SELECT encode(name, 'escape') FROM dlock_lease WHERE position(decode('" + hex(tag_ + ":") +
                     "', 'hex') IN name) = 1 AND (expires_at > clock_timestamp() OR EXISTS (SELECT 1 FROM "
                     "jsonb_each_text(readers) x WHERE x.value::timestamptz > clock_timestamp()))");
      std::vector<std::string> out;
      for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(std::string("live lease row ") + PQgetvalue(r.get(), i, 0));
      return out;
    }
    auto r = query(
        "SELECT a.pid, l.mode, l.granted, l.objid FROM pg_locks l JOIN pg_stat_activity a ON "
        "a.pid = l.pid WHERE l.locktype = 'advisory' AND a.application_name = '" + tag_ + "'");
    std::vector<std::string> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out.push_back(std::string("advisory lock of backend ") + PQgetvalue(r.get(), i, 0) + " " +
                    PQgetvalue(r.get(), i, 1) + (PQgetvalue(r.get(), i, 2)[0] == 't' ? " granted" : " waiting"));
    }
    return out;
  }

  std::optional<HostPort> server() const override { return HostPort{base_.hosts[0].host, port()}; }

  void restart_server() override {
    const char* script = std::getenv("DLOCK_SERVERS_SCRIPT");
    if (script == nullptr || *script == '\0') script = DLOCK_DEFAULT_SERVERS_SCRIPT;
    const std::string cmd = std::string("timeout 60 '") + script + "' restart postgres >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      throw std::runtime_error("'" + std::string(script) + " restart postgres' failed");
    }
  }

 private:
  static std::string hex(const std::string& bytes) {
    static const char d[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
      out.push_back(d[c >> 4]);
      out.push_back(d[c & 15]);
    }
    return out;
  }

  std::uint16_t port() const { return base_.hosts[0].port ? base_.hosts[0].port : 5432; }

  std::unique_ptr<PGresult, ResultDeleter> query(const std::string& sql) const {
    std::unique_ptr<PGconn, ConnDeleter> c(PQconnectdb(raw_base_.c_str()));
    if (PQstatus(c.get()) != CONNECTION_OK) {
      throw std::runtime_error("postgres saboteur: cannot connect: " + std::string(PQerrorMessage(c.get())));
    }
    std::unique_ptr<PGresult, ResultDeleter> r(PQexec(c.get(), sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      throw std::runtime_error("postgres saboteur: " + std::string(PQerrorMessage(c.get())));
    }
    return r;
  }

  bool lease_;
  Uri base_;
  std::string raw_base_;
  std::string tag_;
};

BackendContext make() {
  BackendContext c;
  c.backend = "postgres";
  c.scheme = "postgres";
  c.claims.reentrant = true;
  c.claims.read_write = true;
  c.claims.fair = true;
  c.claims.fencing = true;
  c.claims.push_wakeup = true;
  c.claims.liveness = Liveness::session;
  c.claims.cross_process = true;
  c.claims.network_faults = true;
  c.claims.server_restart = true;
  c.claims.session_is_connection = true;
  c.short_lease = std::chrono::milliseconds(1000);
  c.tolerance = std::chrono::milliseconds(500);
  c.malformed_uris = {{"postgres://127.0.0.1:99999/db", "port"},
                      {"postgres://127.0.0.1:0x10/db", "port"},
                      {"postgres://127.0.0.1:5432", "database"},
                      {"postgres://127.0.0.1:5432/db?bogus=1", "bogus"},
                      {"postgres://127.0.0.1:5432/db?options=-cx", "options"},
                      {"postgres://127.0.0.1:5432/db?mode=rows", "mode"},
                      {"postgres://127.0.0.1:5432/db?table=a.b", "table"},
                      {"postgres://127.0.0.1:5432/db?session_timeout=fast", "session_timeout"}};
  c.closed_port_uri = [](std::uint16_t port) {
    return "postgres://postgres@127.0.0.1:" + std::to_string(port) +
           "/postgres?connect_timeout=500ms&command_timeout=500ms";
  };
  c.make_env = [] { return std::make_unique<PostgresEnv>(false); };
  return c;
}

// mode=lease: lease rows on the server clock; no session, so no server-side queue (not fair).
BackendContext make_lease() {
  BackendContext c = make();
  c.backend = "postgres_lease";
  c.claims.fair = false;
  c.claims.liveness = Liveness::lease;
  c.claims.session_is_connection = false;
  // Lease rows are durable: a restart shorter than a lease leaves the holder renewing its
  // lock, which NetworkFaults.ServerRestartWhileHoldingNeverDoubleGrants reads as "never
  // became available". PgLease.HoldsSurviveAServerRestart tests the restart instead.
  c.claims.server_restart = false;
  c.make_env = [] { return std::make_unique<PostgresEnv>(true); };
  return c;
}

const Registrar registrar(&make);
const Registrar lease_registrar(&make_lease);

}  // namespace
}  // namespace dlock::conformance
