#include "lease_sql.h"

#include "keys.h"

namespace dlock::mysql {
namespace {

constexpr const char* kNow = "SET @dlock_now := CAST(UNIX_TIMESTAMP(NOW(6))*1000000 AS SIGNED);";

std::string q(std::string_view table) { return "`" + std::string(table) + "`"; }
std::string x(std::string_view hex) { return "X'" + std::string(hex) + "'"; }
std::string us(std::chrono::milliseconds d) { return std::to_string(d.count() * 1000); }

}  // namespace

Batch lease_create_table_batch(std::string_view table) {
  return {"CREATE TABLE IF NOT EXISTS " + q(table) +
              " (k BINARY(32) NOT NULL PRIMARY KEY, name VARBINARY(1024) NOT NULL,"
              " owner VARBINARY(1024) NOT NULL, token BIGINT UNSIGNED NOT NULL,"
              " expires_at BIGINT NOT NULL) ENGINE=InnoDB",
          1};
}

Batch lease_acquire_batch(std::string_view table, std::string_view key_hex, std::string_view name_hex,
                          std::string_view owner_hex, std::chrono::milliseconds lease) {
  // Each statement commits on its own (autocommit): the takeover is one atomic UPDATE whose
  // WHERE re-checks the expiry on the server clock, so two clients never both win.
  Batch b;
  b.text = std::string(kNow) + "INSERT IGNORE INTO " + q(table) +
           " (k, name, owner, token, expires_at) VALUES (" + x(key_hex) + ", " + x(name_hex) +
           ", X'', 0, 0);"
           "UPDATE " + q(table) + " SET owner = " + x(owner_hex) +
           ", token = GREATEST(token + 1, @dlock_now), expires_at = @dlock_now + " + us(lease) +
           " WHERE k = " + x(key_hex) + " AND expires_at <= @dlock_now;"
           "SELECT owner = " + x(owner_hex) + " AND expires_at > @dlock_now, token, "
           "GREATEST(expires_at - @dlock_now, 0) FROM " + q(table) + " WHERE k = " + x(key_hex);
  b.statements = 4;
  return b;
}

Batch lease_release_batch(std::string_view table, std::string_view key_hex, std::string_view owner_hex,
                          std::uint64_t token) {
  return {"UPDATE " + q(table) + " SET owner = X'', expires_at = 0 WHERE k = " + x(key_hex) +
              " AND owner = " + x(owner_hex) + " AND token = " + std::to_string(token) +
              ";SELECT ROW_COUNT()",
          2};
}

Batch lease_clear_lost_batch(std::string_view table, std::string_view key_hex,
                             std::string_view owner_hex, const std::vector<SessionRef>& sessions) {
  std::string listed;
  for (const auto& s : sessions) {
    if (!listed.empty()) listed += " OR ";
    listed += "(ID = " + std::to_string(s.id);
    if (!s.host.empty()) listed += " AND HOST = " + x(to_hex(s.host));
    listed += ")";
  }
  if (listed.empty()) listed = "FALSE";
  Batch b;
  b.text = "SELECT COUNT(*) INTO @dlock_listed FROM information_schema.PROCESSLIST WHERE " +
           listed + ";UPDATE " + q(table) + " SET owner = X'', expires_at = 0 WHERE k = " +
           x(key_hex) + " AND owner = " + x(owner_hex) +
           " AND @dlock_listed = 0;SELECT @dlock_listed";
  b.statements = 3;
  return b;
}

Batch lease_renew_batch(std::string_view table, const std::vector<LeaseRef>& locks,
                        std::chrono::milliseconds lease) {
  std::string match;
  for (const auto& l : locks) {
    if (!match.empty()) match += " OR ";
    match += "(k = " + x(l.key_hex) + " AND owner = " + x(l.owner_hex) +
             " AND token = " + std::to_string(l.token) + ")";
  }
  Batch b;
  b.text = std::string(kNow) + "UPDATE " + q(table) + " SET expires_at = @dlock_now + " + us(lease) +
           " WHERE (" + match + ") AND expires_at > @dlock_now;"
           "SELECT HEX(k), token FROM " + q(table) + " WHERE (" + match + ") AND expires_at = @dlock_now + " +
           us(lease);
  b.statements = 3;
  return b;
}

}  // namespace dlock::mysql
