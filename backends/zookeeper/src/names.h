// Lock names (any bytes) to znode names, and the lock nodes' own names.
//
// Layout (backends/zookeeper/README.md): <root>/<enc(name)>/<m>-<id>-<seq>, where
//   enc(name)  keeps the bytes [A-Za-z0-9_-] and writes every other byte as %XX (upper-case
//              hex), '.' and '%' included, so the result is injective, case-sensitive,
//              never contains '/', and is never "." or ".." (ZooKeeper rejects those).
//              Names are at most kMaxNameBytes bytes, so a node name is at most 3 KiB:
//              ZooKeeper has no per-node-name limit below its 1 MiB packet, so we never
//              hash (no collision argument needed);
//   m          'x' exclusive (a writer) or 's' shared (a reader);
//   id         16 hex digits, random per acquire call and session: finds our own node
//              after a create whose answer was lost (the "protected" node idea);
//   seq        the server's sequence suffix (printf %010d of a signed 32-bit counter: 10
//              characters, but 11 after 2^31 creates: "-2147483648").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::zookeeper {

// The code point that starts at s[at] and its length in bytes; nullopt unless a
// well-formed UTF-8 sequence starts there (no overlong forms, surrogates or values above
// U+10FFFF, nothing truncated). REQUIRES: at < s.size().
std::optional<std::pair<char32_t, std::size_t>> utf8_at(std::string_view s, std::size_t at) noexcept;

// True for the characters ZooKeeper takes in a path (PathUtils.validatePath): no C0 or C1
// control, DEL, U+D800..U+F8FF or U+FFF0 and above (it sees UTF-16, where every character
// above U+FFFF is a surrogate pair, and it decodes invalid UTF-8 as U+FFFD).
bool zk_path_char(char32_t c) noexcept;

// True if the server takes `segment` as one node name, and it has no spaces: well-formed
// UTF-8 of zk_path_char characters other than '/' and ' ', neither empty, "." nor "..".
bool valid_node_name(std::string_view segment) noexcept;

// Longest accepted name, in bytes (Capabilities::max_name_bytes).
inline constexpr std::size_t kMaxNameBytes = 1024;

// The escaped node name for `name` (see above). Pure; any bytes accepted.
std::string encode_name(std::string_view name);

// One child of a lock's container node, parsed.
struct Child {
  std::string node;      // the child's name as listed
  char mode = 'x';       // 'x' or 's'
  std::string id;        // 16 hex digits
  std::uint32_t seq = 0; // the sequence counter, as the unsigned value it wraps in
};

// Parses a child name "<m>-<id>-<seq>"; nullopt for anything else (foreign nodes are
// ignored: they cannot be ordered against ours).
std::optional<Child> parse_child(std::string_view node);

// The create path for an acquire: "<parent>/<m>-<id>-" (the server appends the sequence).
std::string node_prefix(const std::string& parent, char mode, std::string_view id);

// Sorts `children` in creation order. The counter is 32 bits and wraps (2^31 creates in one
// container: ~12 days at 2k creates/s on a hot name). The live window of one container is
// always far smaller than 2^31, so the order starts after the largest gap on the circle of
// 2^32 values (as DistributedLock does; Curator and kazoo compare as plain numbers or text).
void sort_by_sequence(std::vector<Child>& children);

}  // namespace dlock::zookeeper
