// Contract 1, names: 1..max bytes, case-sensitive, any bytes, never escaping the namespace.
#include <vector>

#include "framework/conformance_test.h"
#include "framework/taker_client.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(Names);

namespace {

// Names that break naive escaping: paths, hash tags, quotes, SQL and Lua, controls, NUL,
// invalid UTF-8, and pairs that collide under lossy escaping or case folding.
std::vector<std::string> hostile_names(const std::string& base) {
  using namespace std::string_literals;
  return {base + "/x",        base + "/../x",       base + "%2Fx",       base + "%2fx",
          base + "_x",        base + "-x",          base + ".x",         base + "x",
          base + "X",         base + "{x}",         base + "{",          base + "}",
          base + "'",         base + "\"",          base + "`",          base + "\\",
          base + " x",        base + "\tx",         base + "\nx",        base + "\x01\x02",
          base + "\0x"s,      base + "\0"s,         base + "\xff\xfe",   base + "\xc3\xa9",
          base + "e\xcc\x81", base + "\xe6\x97\xa5\xe6\x9c\xac",          base + ":x",
          base + ":t",        base + ":r",          base + "*",          base + "?",
          base + "[a]",       base + "'); DROP TABLE locks; --",     base + "' OR '1'='1",
          base + "]]..redis.call('FLUSHALL')..[[",  base + "\"; os.exit()", "..",
          ".",                "/",                  "../../etc/passwd",  "%00",
          "{" + base + "}",   "~",                  "\x7f",              "CON"};
}

}  // namespace

TEST_P(Names, EmptyIsInvalid) {
  auto p = open();
  DLOCK_EXPECT_ERROR(p->try_lock(""), ErrorCode::invalid_argument);
  if (claims().read_write) DLOCK_EXPECT_ERROR(p->try_lock_shared(""), ErrorCode::invalid_argument);
}

TEST_P(Names, DocumentedMaximumWorksAndLongerIsInvalid) {
  auto p = open();
  auto other = open();
  const auto max = p->capabilities().max_name_bytes;
  ASSERT_GE(max, 16u);
  const std::string prefix = name("max");
  std::string longest = prefix + std::string(max - prefix.size(), 'm');
  auto h = track(*p, longest, Wait::try_once());
  ASSERT_TRUE(h) << "a " << max << "-byte name (the documented maximum) was refused";
  EXPECT_FALSE(other->try_lock(longest).has_value());
  std::string sibling = longest;
  sibling.back() = 'n';  // differs only in the last byte: must be distinct, even when hashed
  EXPECT_TRUE(other->try_lock(sibling).has_value()) << "two maximal names differing in the last byte collide";
  DLOCK_EXPECT_ERROR(p->try_lock(longest + "m"), ErrorCode::invalid_argument);
  try {
    (void)p->try_lock(longest + "m");
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(std::to_string(max)), std::string::npos)
        << "the message should state the limit: " << e.message();
  }
}

TEST_P(Names, CaseSensitive) {
  auto p = open();
  auto other = open();
  const auto n = name("Case");
  std::string lower = n;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto a = track(*p, n, Wait::try_once());
  auto b = track(*other, lower, Wait::try_once());
  ASSERT_TRUE(a);
  EXPECT_TRUE(b) << "names differing only in case collide";
}

TEST_P(Names, HostileNamesAreSafeAndDistinct) {
  auto p = open();
  auto other = open();
  const auto names = hostile_names(name("h"));
  std::vector<std::unique_ptr<TrackedLease>> held;
  // Hold them all at once, each under its own owner: two names mapped to one key would
  // collide here (Busy), whatever the backend's escaping.
  for (std::size_t i = 0; i < names.size(); ++i) {
    AcquireOptions o;
    o.owner = "owner-" + std::to_string(i);
    try {
      auto h = track(*p, names[i], Wait::try_once(), o);
      EXPECT_TRUE(h) << "hostile name #" << i << " collided with an earlier one";
      if (h) held.push_back(std::move(h));
    } catch (const Error& e) {
      ADD_FAILURE() << "hostile name #" << i << " threw " << e.what();
    }
  }
  // Each is really held: another provider is kept out of every one.
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(other->try_lock(names[i]).has_value()) << "hostile name #" << i << " was not held";
  }
  for (auto& h : held) EXPECT_TRUE(h->release());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(other->try_lock(names[i]).has_value()) << "hostile name #" << i << " not freed";
  }
  // check_namespace_contained() runs in TearDown.
}

TEST_P(Names, SameNameIsTheSameLockInAnotherProcess) {
  // Escaping and hashing must not depend on the process (no per-process seed, no locale).
  DLOCK_REQUIRE_CLAIM(cross_process);
  auto p = open();
  auto names = hostile_names(name("x"));
  names.push_back(name("long") + std::string(p->capabilities().max_name_bytes - 40, 'L'));
  std::vector<std::optional<Lease>> held;
  for (const auto& n : names) {
    held.push_back(p->try_lock(n));
    ASSERT_TRUE(held.back());
  }
  Taker taker(env().uri());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(taker.acquire(names[i], milliseconds(0))) << "name #" << i << " maps elsewhere in another process";
  }
  held.clear();
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(taker.acquire(names[i], milliseconds(0))) << "name #" << i << " not free for another process";
  }
}

}  // namespace dlock::conformance
