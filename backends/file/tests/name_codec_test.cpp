// Name mapping: hostile names stay inside the directory, distinct names stay distinct
// (case-only differences too, as a case-insensitive file system would compare them).
#include "name_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace dlock::file {
namespace {

using namespace std::string_literals;

std::string fold(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void expect_safe(const std::string& file) {
  EXPECT_LE(file.size(), 255u) << file;
  EXPECT_NE(file, ".");
  EXPECT_NE(file, "..");
  EXPECT_NE(file.front(), '.') << file;
  for (unsigned char c : file) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == '%';
    EXPECT_TRUE(ok) << "byte " << int(c) << " in " << file;
  }
  EXPECT_TRUE(file.ends_with(".lock")) << file;
}

TEST(NameCodec, ReadableNamesStayReadable) {
  EXPECT_EQ(lock_file_name("orders.v1"), "n-orders.v1.lock");
  EXPECT_EQ(lock_file_name("job_42-x"), "n-job_42-x.lock");
}

TEST(NameCodec, HostileNamesStayInsideTheDirectory) {
  const std::vector<std::string> hostile = {
      "/", "..", ".", "../../etc/passwd", "a/b", "\0"s, "a\0b"s, "\n", "\x7f", "\xff\xfe",
      "caf\xc3\xa9", " ", "%", "%2f", "~root", "*", "?", "\\", ".lock", "-rf"};
  for (const auto& name : hostile) expect_safe(lock_file_name(name));
  EXPECT_EQ(lock_file_name("../x"), "n-..%2fx.lock");
  EXPECT_EQ(lock_file_name("\0"s), "n-%00.lock");
}

TEST(NameCodec, CaseAndEscapesStayDistinct) {
  const std::vector<std::string> names = {"a", "A", "%41", "%", "%25", "ab", "aB", "Ab", "AB",
                                          "a.lock", "a%2elock", "\0"s, "\0\0"s, "0"};
  std::set<std::string> folded;
  for (const auto& n : names) folded.insert(fold(lock_file_name(n)));
  EXPECT_EQ(folded.size(), names.size());
}

TEST(NameCodec, RandomNamesAreDistinctEvenCaseFolded) {
  std::mt19937 rng(12345);
  std::set<std::string> names, files;
  for (int i = 0; i < 20000; ++i) {
    std::string n(1 + rng() % 6, '\0');
    for (auto& c : n) c = static_cast<char>("aAbB%/.\0\xff"[rng() % 9]);
    if (!names.insert(n).second) continue;
    std::string f = lock_file_name(n);
    expect_safe(f);
    EXPECT_TRUE(files.insert(fold(f)).second) << f;
  }
}

TEST(NameCodec, MaximumLengthNamesAreHashedAndDistinct) {
  std::string a(kMaxNameBytes, '\xff');
  std::string b = a;
  b.back() = '\xfe';
  std::string c = a;
  c.front() = 'x';
  for (const auto& n : {a, b, c}) {
    expect_safe(lock_file_name(n));
    EXPECT_TRUE(lock_file_name(n).starts_with("h-"));
  }
  EXPECT_NE(lock_file_name(a), lock_file_name(b));  // same readable prefix, other hash
  EXPECT_NE(lock_file_name(a), lock_file_name(c));
}

TEST(NameCodec, PlainAndHashedFormsMeetAtTheThreshold) {
  std::string longest_plain(kMaxPlainEncoding, 'x');
  std::string shortest_hashed(kMaxPlainEncoding + 1, 'x');
  EXPECT_EQ(lock_file_name(longest_plain), "n-" + longest_plain + ".lock");
  EXPECT_TRUE(lock_file_name(shortest_hashed).starts_with("h-"));
  expect_safe(lock_file_name(longest_plain));
  expect_safe(lock_file_name(shortest_hashed));
  // A hashed prefix never ends in half an escape.
  for (std::size_t pad = 0; pad < 3; ++pad) {
    std::string n = std::string(pad, 'y') + std::string(200, 'Z');
    std::string f = lock_file_name(n);
    std::string prefix = f.substr(2, f.size() - 2 - 1 - 64 - 5);
    auto pct = prefix.rfind('%');
    ASSERT_NE(pct, std::string::npos);
    EXPECT_EQ(pct + 3, prefix.size()) << f;
  }
}

}  // namespace
}  // namespace dlock::file
