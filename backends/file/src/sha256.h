// SHA-256 (FIPS 180-4), for turning long lock names into collision-resistant file names.
// A small self-contained implementation so the backend needs no crypto library; checked
// against the FIPS/NIST test vectors in tests/sha256_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::file {

// The 32-byte digest of `data`. Pure function, thread-safe.
std::array<std::uint8_t, 32> sha256(std::string_view data) noexcept;

// The digest as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace dlock::file
