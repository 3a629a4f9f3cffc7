// Percent-encoding of arbitrary bytes, for names that must become file or node names.
#pragma once

#include <string>
#include <string_view>

namespace dlock::support {

// Which bytes a codec keeps as they are (every other byte becomes "%XX").
using KeepByte = bool (*)(unsigned char);

enum class HexCase { lower, upper };

// `bytes` with every byte that `keep` rejects written as '%' and two hex digits in `hex_case`.
// Injective as long as `keep` rejects '%'. Pure; any bytes accepted (NUL included).
std::string percent_encode(std::string_view bytes, KeepByte keep, HexCase hex_case);

}  // namespace dlock::support
