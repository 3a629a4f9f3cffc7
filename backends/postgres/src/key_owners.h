// KeyOwners: which candidate key (keys.h) each identity owns, as confirmed by a claim on
// the server. Owner rows never change once written, so a confirmed answer stays true and
// an acquire of a name seen before needs no identity check: its statement only locks and
// takes a token. Shared by every session of a backend; bounded (forgotten wholesale when
// full: the next acquire of each name claims again, one extra round trip).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace dlock::postgres {

class KeyOwners {
 public:
  static constexpr std::size_t capacity = 65536;

  struct Owned {
    int index;         // the candidate (keys.h)
    std::int64_t key;  // its advisory key: kept, so a known name costs no hashing either
  };

  // The confirmed candidate of `identity`, if any.
  std::optional<Owned> find(const std::string& identity) const {
    std::lock_guard lock(mu_);
    auto it = map_.find(identity);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

  void confirm(const std::string& identity, Owned owned) {
    std::lock_guard lock(mu_);
    if (map_.size() >= capacity) map_.clear();
    map_[identity] = owned;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Owned> map_;
};

}  // namespace dlock::postgres
