#include "keys.h"

#include <atomic>
#include <cstring>

#include "dlock/support/sha256.h"

namespace dlock::postgres {
namespace {

std::atomic<KeyFunction> override_fn{nullptr};

}  // namespace

std::int64_t sha256_key(std::string_view identity, int index) {
  // Candidate 0 hashes the identity alone; candidate i > 0 appends 0x00 and the byte i.
  const char suffix[2] = {'\0', static_cast<char>(index)};
  const support::Digest digest =
      index > 0 ? support::sha256({identity, std::string_view(suffix, 2)}) : support::sha256({identity});
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];  // big-endian: as the hex reads
  std::int64_t key;
  std::memcpy(&key, &v, sizeof key);
  return key;
}

std::string to_hex(std::string_view bytes) { return support::to_hex(bytes); }

std::string digest_hex16(std::string_view identity) {
  const support::Digest digest = support::sha256({identity});
  return support::to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), 8));
}

std::string key_identity(std::string_view prefix, std::string_view name) {
  std::string id;
  id.reserve(prefix.size() + 1 + name.size());
  id.append(prefix);
  id.push_back('\0');
  id.append(name);
  return id;
}

std::int64_t advisory_key(std::string_view identity, int index) {
  if (KeyFunction f = override_fn.load(std::memory_order_acquire)) return f(identity, index);
  return sha256_key(identity, index);
}

void set_key_function_for_testing(KeyFunction f) noexcept { override_fn.store(f, std::memory_order_release); }

}  // namespace dlock::postgres
