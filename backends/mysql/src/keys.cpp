#include "keys.h"

#include <openssl/evp.h>

#include <array>

#include "dlock/error.h"

namespace dlock::mysql {

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xf]);
  }
  return out;
}

std::string row_key_hex(std::string_view prefix, std::string_view name) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const unsigned char zero = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, prefix.data(), prefix.size()) == 1 &&
                  EVP_DigestUpdate(ctx, &zero, 1) == 1 &&
                  EVP_DigestUpdate(ctx, name.data(), name.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, md.data(), &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len != 32) throw Error(ErrorCode::internal, "mysql: SHA-256 failed (OpenSSL)");
  return to_hex(std::string_view(reinterpret_cast<const char*>(md.data()), len));
}

}  // namespace dlock::mysql
