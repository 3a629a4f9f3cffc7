#include "keys.h"

#include <openssl/sha.h>

#include <atomic>
#include <cstring>

namespace dlock::postgres {
namespace {

std::atomic<KeyFunction> override_fn{nullptr};

}  // namespace

std::int64_t sha256_key(std::string_view identity, int index) {
  std::string input(identity);
  if (index > 0) {
    input.push_back('\0');
    input.push_back(static_cast<char>(index));
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];  // big-endian: as the hex reads
  std::int64_t key;
  std::memcpy(&key, &v, sizeof key);
  return key;
}

std::string to_hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string digest_hex16(std::string_view identity) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(identity.data()), identity.size(), digest);
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest), 8));
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
