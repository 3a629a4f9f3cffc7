// The backend's Lua scripts (lua/*.lua, compiled in) and how they are run: EVALSHA, and on
// NOSCRIPT (after SCRIPT FLUSH, a restart or a failover) SCRIPT LOAD and once more.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "connection.h"

namespace dlock::redis {

namespace lua {
extern const std::string_view acquire;
extern const std::string_view release;
extern const std::string_view extend;
extern const std::string_view abandon;
extern const std::string_view permissions;
extern const std::string_view pickup;
}  // namespace lua

enum class Script { acquire, release, extend, abandon, permissions, pickup };

// Thread safety: immutable after construction (a script's SHA1 never changes).
class Scripts {
 public:
  // Loads every script on `c` and keeps their SHA1s. Throws like Connection::command, and
  // translate_error() for an error reply (e.g. NOPERM when the user may not load scripts).
  explicit Scripts(Connection& c);

  // EVALSHA `s` with `keys` and `args`; on NOSCRIPT loads it and runs it once more.
  // Returns the reply; throws translate_error() for an error reply, Error(unavailable) on
  // transport failure.
  Reply run(Connection& c, Script s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args) const;

  // Pipelined form: queues EVALSHA without reading; the caller reads the reply and calls
  // load() and re-runs when is_noscript(reply).
  void append(Connection& c, Script s, std::span<const std::string_view> keys,
              std::span<const std::string_view> args) const;
  void load(Connection& c, Script s) const;
  const std::string& sha(Script s) const noexcept { return sha_[static_cast<std::size_t>(s)]; }
  static bool is_noscript(const redisReply* reply) noexcept;

 private:
  static std::string_view source(Script s) noexcept;
  std::array<std::string, 6> sha_;
};

}  // namespace dlock::redis
