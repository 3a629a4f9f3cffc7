// The SQL text of mode=lease (ShedLock-style lease rows on the server clock). Only
// dlock-built values are spliced in: checked table names, hex keys/names/owners, numbers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sql.h"

namespace dlock::mysql {

// The lease table (also in backends/mysql/schema.sql).
Batch lease_create_table_batch(std::string_view table);

// One round trip: creates the row if new, takes it over if free or expired (owner, a token
// above every earlier one and at least the server clock in µs, expiry = now + lease), and
// answers one row: granted (0/1), token, the holder's remaining TTL in µs.
Batch lease_acquire_batch(std::string_view table, std::string_view key_hex, std::string_view name_hex,
                          std::string_view owner_hex, std::chrono::milliseconds lease);

// Owner- and token-checked release; answers one row: ROW_COUNT() (1 = released).
Batch lease_release_batch(std::string_view table, std::string_view key_hex, std::string_view owner_hex,
                          std::uint64_t token);

// A server session: CONNECTION_ID() and its HOST in information_schema.PROCESSLIST.
struct SessionRef {
  std::uint64_t id = 0;
  std::string host;  // "" matches the id alone
};

// Clears the row `key_hex` (owner '', expiry 0) if `owner_hex` owns it, but only once the
// server lists none of `sessions` any more: a session still open may yet run an acquire
// sent on it, one that is gone has run it or never will. Answers one row: how many of them
// are still listed (0: the owner-checked clear ran).
Batch lease_clear_lost_batch(std::string_view table, std::string_view key_hex,
                             std::string_view owner_hex, const std::vector<SessionRef>& sessions);

struct LeaseRef {
  std::string key_hex, owner_hex;
  std::uint64_t token = 0;
};

// Renews every live lease in `locks` to now + lease in one statement; answers HEX(k) and token
// of the rows it renewed.
Batch lease_renew_batch(std::string_view table, const std::vector<LeaseRef>& locks,
                        std::chrono::milliseconds lease);

}  // namespace dlock::mysql
