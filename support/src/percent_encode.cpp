#include "dlock/support/percent_encode.h"

namespace dlock::support {

std::string percent_encode(std::string_view bytes, KeepByte keep, HexCase hex_case) {
  const char* hex = hex_case == HexCase::lower ? "0123456789abcdef" : "0123456789ABCDEF";
  std::string out;
  out.reserve(bytes.size() + 8);
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (keep(c)) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

}  // namespace dlock::support
