#include "names.h"

#include <algorithm>
#include <charconv>

#include "dlock/support/percent_encode.h"

namespace dlock::zookeeper {
namespace {

bool kept(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

bool hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::optional<std::pair<char32_t, std::size_t>> utf8_at(std::string_view s, std::size_t at) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(at);
  if (b0 < 0x80) return std::pair<char32_t, std::size_t>{b0, 1};
  std::size_t n;
  char32_t c, min;
  if ((b0 & 0xe0) == 0xc0) {
    n = 2, c = b0 & 0x1f, min = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3, c = b0 & 0x0f, min = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return std::nullopt;  // a continuation byte, or 0xf8..0xff
  }
  if (s.size() - at < n) return std::nullopt;
  for (std::size_t i = 1; i < n; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return std::nullopt;
    c = (c << 6) | (byte(at + i) & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return std::nullopt;
  return std::pair<char32_t, std::size_t>{c, n};
}

bool zk_path_char(char32_t c) noexcept {
  return c >= 0x20 && !(c >= 0x7f && c <= 0x9f) && !(c >= 0xd800 && c <= 0xf8ff) && c < 0xfff0;
}

bool valid_node_name(std::string_view s) noexcept {
  if (s.empty() || s == "." || s == "..") return false;
  for (std::size_t i = 0; i < s.size();) {
    const auto cp = utf8_at(s, i);
    if (!cp) return false;
    const char32_t c = cp->first;
    if (!zk_path_char(c) || c == ' ' || c == '/') return false;
    i += cp->second;
  }
  return true;
}

std::string encode_name(std::string_view name) {
  return support::percent_encode(name, &kept, support::HexCase::upper);
}

std::string node_prefix(const std::string& parent, char mode, std::string_view id) {
  std::string p;
  p.reserve(parent.size() + id.size() + 4);
  p += parent;
  p += '/';
  p += mode;
  p += '-';
  p += id;
  p += '-';
  return p;
}

std::optional<Child> parse_child(std::string_view node) {
  // m '-' 16 hex '-' seq, where seq is %010d: 10 characters, 11 below -999999999
  if (node.size() != 1 + 1 + 16 + 1 + 10 && node.size() != 1 + 1 + 16 + 1 + 11) return std::nullopt;
  if ((node[0] != 'x' && node[0] != 's') || node[1] != '-' || node[18] != '-') return std::nullopt;
  const std::string_view id = node.substr(2, 16);
  if (!std::all_of(id.begin(), id.end(), hex_digit)) return std::nullopt;
  std::string_view seq = node.substr(19);
  bool negative = false;
  if (seq.size() == 11 && seq.front() != '-') return std::nullopt;
  if (seq.front() == '-') {
    negative = true;
    seq.remove_prefix(1);
  }
  std::int64_t magnitude = 0;
  const auto [ptr, ec] = std::from_chars(seq.data(), seq.data() + seq.size(), magnitude);
  if (ec != std::errc{} || ptr != seq.data() + seq.size()) return std::nullopt;
  const std::int64_t value = negative ? -magnitude : magnitude;
  if (value < INT32_MIN || value > INT32_MAX) return std::nullopt;
  Child c;
  c.node = std::string(node);
  c.mode = node[0];
  c.id = std::string(id);
  c.seq = static_cast<std::uint32_t>(static_cast<std::int32_t>(value));
  return c;
}

void sort_by_sequence(std::vector<Child>& children) {
  std::sort(children.begin(), children.end(),
            [](const Child& a, const Child& b) { return a.seq < b.seq; });
  const std::size_t n = children.size();
  if (n < 2) return;
  // The gap before element i (circularly: element 0's gap comes from the last one).
  std::size_t start = 0;
  std::uint64_t widest = (std::uint64_t{1} << 32) - children[n - 1].seq + children[0].seq;
  for (std::size_t i = 1; i < n; ++i) {
    const std::uint64_t gap = children[i].seq - children[i - 1].seq;
    if (gap > widest) {
      widest = gap;
      start = i;
    }
  }
  std::rotate(children.begin(), children.begin() + static_cast<std::ptrdiff_t>(start), children.end());
}

}  // namespace dlock::zookeeper
