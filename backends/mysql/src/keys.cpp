#include "keys.h"

#include "dlock/support/sha256.h"

namespace dlock::mysql {

std::string to_hex(std::string_view bytes) { return support::to_hex(bytes); }

std::string row_key_hex(std::string_view prefix, std::string_view name) {
  return support::to_hex(support::sha256({prefix, std::string_view("\0", 1), name}));
}

}  // namespace dlock::mysql
