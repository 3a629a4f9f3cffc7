#include "dlock/support/sha256.h"

#include <openssl/evp.h>

#include <memory>

#include "dlock/error.h"

namespace dlock::support {

Digest sha256(std::initializer_list<std::string_view> parts) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
  for (std::string_view part : parts) {
    ok = ok && EVP_DigestUpdate(ctx.get(), part.data(), part.size()) == 1;
  }
  Digest digest{};
  unsigned int length = 0;
  ok = ok && EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) == 1 && length == digest.size();
  if (!ok) throw Error(ErrorCode::internal, "SHA-256 failed (OpenSSL libcrypto)");
  return digest;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xF]);
  }
  return out;
}

std::string to_hex(const Digest& digest) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace dlock::support
