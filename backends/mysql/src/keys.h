// Lock names → row keys. A name is any bytes; it never reaches SQL as text: the key is
// SHA-256(prefix ‖ 0x00 ‖ name) written as a hex literal, the name column as hex too.
#pragma once

#include <string>
#include <string_view>

namespace dlock::mysql {

// The 32-byte key of `name` under `prefix`, as 64 lowercase hex digits (for X'…').
// Injective in practice (SHA-256) and case-sensitive; the 0x00 separator keeps
// ("a","bc") apart from ("ab","c").
std::string row_key_hex(std::string_view prefix, std::string_view name);

// Lowercase hex of arbitrary bytes ("" for empty input).
std::string to_hex(std::string_view bytes);

}  // namespace dlock::mysql
