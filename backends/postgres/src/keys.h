// Advisory-lock keys: a name becomes a signed 64-bit key, the first 8 bytes of
// SHA-256(prefix ‖ 0x00 ‖ name). Collisions are resolved through the fence table, which
// records the identity (prefix ‖ 0x00 ‖ name) that owns each key (README.md, "Keys and
// collisions"): a name whose key is owned by another identity moves on to its next
// candidate key, SHA-256(prefix ‖ 0x00 ‖ name ‖ 0x00 ‖ i) for i = 1, 2, …
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::postgres {

// How many candidate keys a name may try before the backend gives up (internal error): with
// 64-bit keys a second collision for one name is already beyond belief.
inline constexpr int max_key_candidates = 8;

// The bytes stored in the fence row as the key's owner: prefix ‖ 0x00 ‖ name.
std::string key_identity(std::string_view prefix, std::string_view name);

// Candidate `index` (0-based) of the identity's advisory key.
std::int64_t advisory_key(std::string_view identity, int index);

// The SHA-256 candidate key itself (what advisory_key() answers without a test hook).
std::int64_t sha256_key(std::string_view identity, int index);

// The first 16 hex digits of SHA-256(identity): lease mode's wake-up payload for a name.
std::string digest_hex16(std::string_view identity);

// Lower-case hex of arbitrary bytes.
std::string to_hex(std::string_view bytes);

// Test hook: replaces advisory_key() (nullptr restores SHA-256), to force collisions.
using KeyFunction = std::int64_t (*)(std::string_view identity, int index);
void set_key_function_for_testing(KeyFunction f) noexcept;

}  // namespace dlock::postgres
