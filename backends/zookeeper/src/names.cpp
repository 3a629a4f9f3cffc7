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
