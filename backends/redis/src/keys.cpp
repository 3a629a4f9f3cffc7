#include "keys.h"

#include <cstdint>

#include "dlock/support/percent_encode.h"

namespace dlock::redis {

namespace {

bool plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '/' || c == '-';
}

}  // namespace

std::string encode_name(std::string_view name) {
  return support::percent_encode(name, &plain, support::HexCase::upper);
}

std::string lock_key(std::string_view prefix, std::string_view name) {
  std::string key;
  key.reserve(prefix.size() + name.size() + 2);
  key.append(prefix).append("{").append(encode_name(name)).append("}");
  return key;
}

LockKeys::LockKeys(std::string_view prefix, std::string_view name) : hold(lock_key(prefix, name)) {
  readers = hold + ":r";
  counter = hold + ":t";
  queue = hold + ":q";
  deadlines = hold + ":d";
}

std::string LockKeys::latch(std::string_view request_id) const {
  std::string key = hold;
  key.append(":u:").append(request_id);
  return key;
}

std::string LockKeys::grants(std::string_view waiter_id) const {
  std::string key = hold;
  key.append(":g:").append(waiter_id);
  return key;
}

std::string dataset_marker(std::string_view prefix) { return std::string(prefix) + "epoch"; }

namespace {
// CRC16-CCITT (XMODEM), as Redis Cluster computes slots.
std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<std::uint16_t>(crc ^ (c << 8));
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}
}  // namespace

unsigned hash_slot(std::string_view key) noexcept {
  auto open = key.find('{');
  if (open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return crc16(key) & 16383u;
}

}  // namespace dlock::redis
