// The PostgreSQL wire floor: a lock done by hand with libpq — prepared
// pg_try_advisory_lock($1) + pg_advisory_unlock($1), 2 round trips, no fencing — plus an
// empty query (1 round trip).
#include <unistd.h>

#include <stdexcept>
#include <vector>

#include "floor.h"
#include "pg_wire.h"

namespace dlock_bench {

PgConnPtr pg_connect(const dlock::Uri& uri) {
  std::string hosts, ports;
  for (std::size_t i = 0; i < uri.hosts.size(); ++i) {
    hosts += (i ? "," : "") + uri.hosts[i].host;
    ports += (i ? "," : "") + std::to_string(uri.hosts[i].port ? uri.hosts[i].port : 5432);
  }
  std::vector<std::pair<std::string, std::string>> kv = {
      {"host", hosts}, {"port", ports}, {"dbname", uri.path.size() > 1 ? uri.path.substr(1) : "postgres"}};
  if (!uri.user.empty()) kv.emplace_back("user", uri.user);
  if (uri.password) kv.emplace_back("password", *uri.password);
  for (const auto& [k, v] : uri.params) {
    if (k == "password" || k == "sslmode" || k == "sslrootcert" || k == "sslcert" || k == "sslkey") kv.emplace_back(k, v);
  }
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : kv) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PgConnPtr c(PQconnectdbParams(keys.data(), values.data(), 0));
  if (PQstatus(c.get()) != CONNECTION_OK) {
    throw std::runtime_error(std::string("libpq connect: ") + PQerrorMessage(c.get()));
  }
  return c;
}

void pg_prepare(PGconn* c, const char* name, const char* sql) {
  PGresult* r = PQprepare(c, name, sql, 0, nullptr);
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) throw std::runtime_error(std::string("PREPARE: ") + PQerrorMessage(c));
}

std::string pg_exec_prepared(PGconn* c, const char* stmt, const std::string& param) {
  const char* values[1] = {param.c_str()};
  PGresult* r = PQexecPrepared(c, stmt, 1, values, nullptr, nullptr, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    PQclear(r);
    throw std::runtime_error(std::string("floor statement failed: ") + PQerrorMessage(c));
  }
  std::string v = PQgetvalue(r, 0, 0);
  PQclear(r);
  return v;
}

Floor make_postgres_floor(const dlock::Uri& uri) {
  struct State {
    PgConnPtr conn;
    std::string key;
  };
  auto st = std::make_shared<State>();
  st->conn = pg_connect(uri);
  st->key = std::to_string(0x6465'6e63'6800LL + getpid());
  pg_prepare(st->conn.get(), "floor_try", "SELECT pg_try_advisory_lock($1::bigint)");
  pg_prepare(st->conn.get(), "floor_unlock", "SELECT pg_advisory_unlock($1::bigint)");
  Floor f;
  f.wire = true;
  f.state = st;
  State* s = st.get();
  f.ping_label = "raw libpq empty query (1 RT)";
  f.ping = [s] {
    PGresult* r = PQexec(s->conn.get(), "");
    const bool ok = PQresultStatus(r) == PGRES_EMPTY_QUERY;
    PQclear(r);
    if (!ok) throw std::runtime_error("floor ping failed");
  };
  f.lock_label = "raw libpq prepared pg_try_advisory_lock + pg_advisory_unlock (2 RT)";
  f.lock = [s] {
    if (pg_exec_prepared(s->conn.get(), "floor_try", s->key) != "t") throw std::runtime_error("floor key busy");
    if (pg_exec_prepared(s->conn.get(), "floor_unlock", s->key) != "t") throw std::runtime_error("floor unlock: f");
  };
  return f;
}

}  // namespace dlock_bench
