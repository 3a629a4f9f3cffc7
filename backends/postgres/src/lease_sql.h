// The SQL of mode=lease: one row per name (name = prefix ‖ 0x00 ‖ name, bytea) with the
// exclusive owner, its expiry, the readers (jsonb: hex owner → expiry) and the fencing
// counter, all on the server clock. Readers live in the writer's row so that a writer's
// conditional upsert re-checks them on the newest row version (a separate table would let it
// miss a reader that committed after its snapshot). Values travel as parameters ($n, text
// format: bytea as '\x…' hex); renewals, batched into one multi-statement round trip, carry
// only hex literals built by dlock, never user text.
#pragma once

#include <chrono>
#include <string>

namespace dlock::postgres {

// How long a waiting writer's intent keeps new readers out unless the writer renews it (it
// does at every attempt, at least every third of this): a dead writer blocks readers no longer.
inline constexpr std::chrono::milliseconds writer_intent{3000};

struct LeaseSql {
  std::string create_table;
  // ($1 name, $2 owner bytea | hex owner text for readers, $3 lease ms[, $4 will wait]) ->
  // token | NULL, remaining ms of the current holders (NULL when none), 1 when a busy
  // writer registered its intent to wait (readers are then refused: writer preference).
  std::string acquire_x;
  std::string acquire_s;
  // ($1 name, $2 owner bytea | hex owner text, $3 channel) -> count released (0 or 1);
  // notifies `channel` with digest_hex16(name) when it released.
  std::string release_x;
  std::string release_s;
  // ($1 name, $2 owner bytea, $3 channel): a waiting writer gave up; readers may enter.
  std::string give_up;
  std::string channel;  // LISTEN/NOTIFY channel: the table's name

  LeaseSql(const std::string& schema, const std::string& table);

  // One renewal statement (owner-checked, only while still valid) for a multi-statement
  // batch. `name_hex`/`owner_hex` are lower-case hex built by dlock.
  std::string renew_x(const std::string& name_hex, const std::string& owner_hex,
                      std::chrono::milliseconds lease) const;
  std::string renew_s(const std::string& name_hex, const std::string& owner_hex,
                      std::chrono::milliseconds lease) const;

 private:
  std::string table_;
};

}  // namespace dlock::postgres
