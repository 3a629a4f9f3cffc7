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

// The hash behind long names (OpenSSL's SHA-256) on the FIPS 180-2 examples.
TEST(NameCodec, HashIsSha256OnTheFipsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// File names are shared by every process (and dlock build) using a directory: long names
// must map exactly as they did with the earlier built-in SHA-256 (values from that build,
// checked with Python's hashlib), or two builds would lock two different files.
TEST(NameCodec, LongNamesMapAsBefore) {
  EXPECT_EQ(lock_file_name(std::string(200, 'A')),
            "h-%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41-"
            "70d3bf8b0b9d83a61012f35fbf460c4207063fe31b4d6178390fe3b721cc03f7.lock");
  EXPECT_EQ(lock_file_name(std::string(1024, '\xff')),
            "h-%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff%ff-"
            "5f4ecdb7b71c3e403983fe405cddcdc2f2576b655fdb3e80d94a6f7c32e58bc2.lock");
  // The two FIPS multi-block inputs joined: 169 bytes, over the plain limit.
  EXPECT_EQ(lock_file_name("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                           "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu/"
                           "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "h-abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno-"
            "5dd4d872c7fe6b365708c5a3ed92dab46dae9be8cbd438579aa340c6319e700b.lock");
}

}  // namespace
}  // namespace dlock::file
