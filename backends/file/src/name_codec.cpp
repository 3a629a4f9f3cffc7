#include "name_codec.h"

#include "dlock/support/percent_encode.h"
#include "dlock/support/sha256.h"

namespace dlock::file {
namespace {

bool kept(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

}  // namespace

std::string sha256_hex(std::string_view data) { return support::to_hex(support::sha256({data})); }

std::string escape_name(std::string_view name) {
  return support::percent_encode(name, &kept, support::HexCase::lower);
}

std::string lock_file_name(std::string_view name) {
  std::string escaped = escape_name(name);
  if (escaped.size() <= kMaxPlainEncoding) return "n-" + escaped + ".lock";
  // Cut the readable prefix at an escape boundary so it never ends in half an escape.
  std::size_t cut = kHashedPrefix;
  if (escaped[cut - 1] == '%') cut -= 1;
  else if (escaped[cut - 2] == '%') cut -= 2;
  return "h-" + escaped.substr(0, cut) + "-" + sha256_hex(name) + ".lock";
}

}  // namespace dlock::file
