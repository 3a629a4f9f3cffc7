// Lock names (any bytes) to file names inside the lock directory.
//
// Rules, so that a name can never escape the directory and distinct names stay distinct,
// even on case-insensitive or Unicode-normalizing file systems:
//   * bytes a-z 0-9 '-' '_' '.' are kept; every other byte (upper case, '/', NUL, '%',
//     controls, non-ASCII) becomes "%xx" in lower-case hex. The result is reversible and
//     uses only lower-case ASCII, so case folding cannot merge two names;
//   * the file name is "n-" + encoding + ".lock" when the encoding is at most
//     kMaxPlainEncoding characters; otherwise "h-" + the encoding's first characters (for
//     people reading the directory) + "-" + SHA-256 of the raw name in hex + ".lock"
//     (dlock::support, OpenSSL's libcrypto, computes it);
//   * the "n-"/"h-" prefix keeps the two forms apart and means no file name is ever "." or
//     "..", starts with a dot, or exceeds 255 bytes (NAME_MAX).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::file {

// Longest accepted name, in bytes (Capabilities::max_name_bytes).
inline constexpr std::size_t kMaxNameBytes = 1024;
// Longest escaped name kept whole in a file name; longer ones are hashed.
inline constexpr std::size_t kMaxPlainEncoding = 160;
// Characters of the escaped name kept as a readable prefix of a hashed file name.
inline constexpr std::size_t kHashedPrefix = 64;

// The escaped form of `name` (see above). Pure; any bytes accepted.
std::string escape_name(std::string_view name);

// SHA-256 of `data` as 64 lower-case hex digits (dlock::support). Throws Error(internal)
// if libcrypto fails.
std::string sha256_hex(std::string_view data);

// The file name for `name`: never contains '/', never "." or "..", at most 255 bytes,
// only [a-z0-9._%-]. REQUIRES: 1 <= name.size() (the core checks the bounds).
std::string lock_file_name(std::string_view name);

}  // namespace dlock::file
