#include "scripts.h"

#include "errors.h"

namespace dlock::redis {
namespace {

std::size_t index(Script s) noexcept { return static_cast<std::size_t>(s); }

const char* name(Script s) noexcept {
  switch (s) {
    case Script::acquire: return "acquire script";
    case Script::release: return "release script";
    case Script::extend: return "extend script";
    case Script::abandon: return "abandon script";
    case Script::permissions: return "permission check";
    case Script::pickup: return "pick-up script";
  }
  return "script";
}

}  // namespace

std::string_view Scripts::source(Script s) noexcept {
  switch (s) {
    case Script::acquire: return lua::acquire;
    case Script::release: return lua::release;
    case Script::extend: return lua::extend;
    case Script::abandon: return lua::abandon;
    case Script::permissions: return lua::permissions;
    case Script::pickup: return lua::pickup;
  }
  return {};
}

Scripts::Scripts(Connection& c) {
  for (Script s : {Script::acquire, Script::release, Script::extend, Script::abandon,
                   Script::permissions, Script::pickup}) {
    const std::string_view cmd[] = {"SCRIPT", "LOAD", source(s)};
    Reply r = c.command(cmd);
    if (r->type != REDIS_REPLY_STRING) c.fail(std::string("load ") + name(s), r.get());
    sha_[index(s)].assign(r->str, r->len);
  }
}

void Scripts::load(Connection& c, Script s) const {
  const std::string_view cmd[] = {"SCRIPT", "LOAD", source(s)};
  Reply r = c.command(cmd);
  if (r->type != REDIS_REPLY_STRING) c.fail(std::string("load ") + name(s), r.get());
}

void Scripts::append(Connection& c, Script s, std::span<const std::string_view> keys,
                     std::span<const std::string_view> args) const {
  constexpr std::size_t kInline = 24;
  const std::string numkeys = std::to_string(keys.size());
  const std::size_t n = 3 + keys.size() + args.size();
  std::array<std::string_view, kInline> small;
  std::vector<std::string_view> big;
  std::span<std::string_view> argv;
  if (n <= kInline) {
    argv = std::span<std::string_view>(small.data(), n);
  } else {
    big.resize(n);
    argv = big;
  }
  argv[0] = "EVALSHA";
  argv[1] = sha_[index(s)];
  argv[2] = numkeys;
  std::size_t i = 3;
  for (auto k : keys) argv[i++] = k;
  for (auto a : args) argv[i++] = a;
  c.append(argv);
}

Reply Scripts::run(Connection& c, Script s, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args) const {
  append(c, s, keys, args);
  Reply r = c.read_reply();
  if (is_noscript(r.get())) {
    load(c, s);
    append(c, s, keys, args);
    r = c.read_reply();
  }
  if (r->type == REDIS_REPLY_ERROR) c.fail(name(s), r.get());
  return r;
}

bool Scripts::is_noscript(const redisReply* reply) noexcept { return is_error(reply, "NOSCRIPT"); }

}  // namespace dlock::redis
