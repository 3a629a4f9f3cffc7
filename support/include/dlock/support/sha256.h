// SHA-256 (OpenSSL's libcrypto) and hex, for names that must become fixed-size keys.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace dlock::support {

using Digest = std::array<std::uint8_t, 32>;

// SHA-256 of the concatenation of `parts`. Throws dlock::Error(internal) if libcrypto fails.
Digest sha256(std::initializer_list<std::string_view> parts);

// Lower-case hex of `bytes` (two characters per byte).
std::string to_hex(std::string_view bytes);
std::string to_hex(const Digest& digest);

}  // namespace dlock::support
