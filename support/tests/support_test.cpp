// The support library: SHA-256 against FIPS 180-2 vectors, hex, eventfd wake-ups, percent-encoding.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include "dlock/support/event_fd.h"
#include "dlock/support/percent_encode.h"
#include "dlock/support/sha256.h"

namespace dlock::support {
namespace {

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(to_hex(sha256({"abc"})), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256({""})), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256({"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"})),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Parts are concatenated, NUL bytes included.
  EXPECT_EQ(sha256({"a", "bc"}), sha256({"abc"}));
  EXPECT_NE(sha256({"p", std::string_view("\0", 1), "n"}), sha256({"pn"}));
}

TEST(Hex, EveryByte) {
  EXPECT_EQ(to_hex(std::string_view("\x00\x7f\x80\xff", 4)), "007f80ff");
  EXPECT_EQ(to_hex(""), "");
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(EventFd, SignalMakesItReadableUntilDrained) {
  EventFd e;
  ASSERT_TRUE(e.valid());
  EXPECT_FALSE(readable(e.fd()));
  e.signal();
  e.signal();
  EXPECT_TRUE(readable(e.fd()));
  EXPECT_TRUE(e.drain());
  EXPECT_FALSE(readable(e.fd()));
  EXPECT_FALSE(e.drain());
}

bool keep_lower_letters(unsigned char c) { return c >= 'a' && c <= 'z'; }

TEST(PercentEncode, KeepsWhatTheCodecKeepsAndEscapesEveryOtherByte) {
  const std::string_view bytes("ab/%\0\xff\x7fZ", 8);
  EXPECT_EQ(percent_encode(bytes, &keep_lower_letters, HexCase::lower), "ab%2f%25%00%ff%7f%5a");
  EXPECT_EQ(percent_encode(bytes, &keep_lower_letters, HexCase::upper), "ab%2F%25%00%FF%7F%5A");
  EXPECT_EQ(percent_encode("", &keep_lower_letters, HexCase::lower), "");
}

TEST(PercentEncode, DistinctNamesStayDistinct) {
  // '%' is always escaped, so an escape in the input never reads as an escaped byte.
  EXPECT_NE(percent_encode("%2f", &keep_lower_letters, HexCase::lower),
            percent_encode("/", &keep_lower_letters, HexCase::lower));
}

}  // namespace
}  // namespace dlock::support
