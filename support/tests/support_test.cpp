// The support library: SHA-256 against FIPS 180-2 vectors, hex, eventfd wake-ups, fork guard.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock/support/event_fd.h"
#include "dlock/support/fork_guard.h"
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

TEST(ForkGuard, OnlyTheChildSeesTheFork) {
  ForkGuard guard;
  EXPECT_FALSE(guard.in_forked_child());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(guard.in_forked_child() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child did not see the fork";
  EXPECT_FALSE(guard.in_forked_child());
}

}  // namespace
}  // namespace dlock::support
