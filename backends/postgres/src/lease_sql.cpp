#include "lease_sql.h"

#include "sql.h"

namespace dlock::postgres {
namespace {

const std::string now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

// Remaining time of whoever holds $1 (writer or the last reader), for Busy::retry_after.
std::string remaining(const std::string& t) {
  return "(SELECT ceil(extract(epoch FROM (GREATEST(t.expires_at, (SELECT max(r.value::timestamptz) "
         "FROM jsonb_each_text(t.readers) r)) - clock_timestamp())) * 1000)::bigint FROM " + t +
         " t WHERE t.name = $1::bytea)";
}

}  // namespace

LeaseSql::LeaseSql(const std::string& schema, const std::string& table) : channel(table) {
  table_ = qualified(schema, table);
  const std::string& t = table_;
  create_table = create_if_missing(t, "CREATE TABLE IF NOT EXISTS " + t +
                                          " (name bytea PRIMARY KEY, owner bytea, expires_at timestamptz, "
                                          "readers jsonb NOT NULL DEFAULT '{}', token bigint NOT NULL, "
                                          "wwait bytea, wwait_until timestamptz)");
  const std::string live_readers =
      "EXISTS (SELECT 1 FROM jsonb_each_text(l.readers) r WHERE r.value::timestamptz > clock_timestamp())";
  acquire_x = "WITH u AS (INSERT INTO " + t + " AS l (name, owner, expires_at, readers, token) "
              "VALUES ($1::bytea, $2::bytea, clock_timestamp() + $3::bigint * interval '1 ms', '{}', " + now_us + ") "
              "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, "
              "readers = '{}', token = GREATEST(l.token + 1, EXCLUDED.token), wwait = NULL, wwait_until = NULL "
              "WHERE (l.expires_at IS NULL OR l.expires_at <= clock_timestamp()) AND NOT " + live_readers +
              " RETURNING token), "
              // A writer that will wait keeps new readers out (writer preference) for
              // writer_intent; it renews that at every attempt and clears it when it gives up.
              "w AS (UPDATE " + t + " SET wwait = $2::bytea, wwait_until = clock_timestamp() + interval '" +
              std::to_string(writer_intent.count()) + " ms' WHERE $4::boolean AND name = $1::bytea "
              "AND NOT EXISTS (SELECT 1 FROM u) AND (wwait IS NULL OR wwait = $2::bytea OR "
              "wwait_until <= clock_timestamp()) RETURNING 1) "
              "SELECT (SELECT token FROM u), " + remaining(t) + ", (SELECT count(*) FROM w)";
  acquire_s = "WITH u AS (INSERT INTO " + t + " AS l (name, owner, expires_at, readers, token) "
              "VALUES ($1::bytea, NULL, NULL, jsonb_build_object($2::text, clock_timestamp() + $3::bigint * "
              "interval '1 ms'), " + now_us + ") "
              "ON CONFLICT (name) DO UPDATE SET readers = COALESCE((SELECT jsonb_object_agg(r.key, r.value) "
              "FROM jsonb_each_text(l.readers) r WHERE r.value::timestamptz > clock_timestamp()), '{}'::jsonb) "
              "|| EXCLUDED.readers, token = GREATEST(l.token + 1, EXCLUDED.token) "
              "WHERE (l.expires_at IS NULL OR l.expires_at <= clock_timestamp()) "
              "AND (l.wwait_until IS NULL OR l.wwait_until <= clock_timestamp()) "
              "RETURNING token) SELECT (SELECT token FROM u), " + remaining(t) + ", 0::bigint";
  const std::string notify = "SELECT count(*) FROM (SELECT pg_notify($3::text, left(encode(sha256(name), 'hex'), 16)) FROM u) n";
  release_x = "WITH u AS (UPDATE " + t + " SET owner = NULL, expires_at = NULL WHERE name = $1::bytea "
              "AND owner = $2::bytea AND expires_at > clock_timestamp() RETURNING name) " + notify;
  give_up = "WITH u AS (UPDATE " + t + " SET wwait = NULL, wwait_until = NULL WHERE name = $1::bytea "
            "AND wwait = $2::bytea RETURNING name) " + notify;
  release_s = "WITH u AS (UPDATE " + t + " SET readers = readers - $2::text WHERE name = $1::bytea "
              "AND (readers ->> $2::text)::timestamptz > clock_timestamp() RETURNING name) " + notify;
}

std::string LeaseSql::renew_x(const std::string& name_hex, const std::string& owner_hex,
                              std::chrono::milliseconds lease) const {
  return "UPDATE " + table_ + " SET expires_at = clock_timestamp() + " + std::to_string(lease.count()) +
         " * interval '1 ms' WHERE name = decode('" + name_hex + "', 'hex') AND owner = decode('" + owner_hex +
         "', 'hex') AND expires_at > clock_timestamp()";
}

std::string LeaseSql::renew_s(const std::string& name_hex, const std::string& owner_hex,
                              std::chrono::milliseconds lease) const {
  return "UPDATE " + table_ + " SET readers = jsonb_set(readers, ARRAY['" + owner_hex +
         "'], to_jsonb(clock_timestamp() + " + std::to_string(lease.count()) +
          " * interval '1 ms')) WHERE name = decode('" + name_hex + "', 'hex') AND (readers ->> '" + owner_hex +
         "')::timestamptz > clock_timestamp()";
}

}  // namespace dlock::postgres
