// The fencing counter's file format: increments, persistence, and survival of torn slots.
#include "fence_counter.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "dlock/error.h"
#include "range_lock.h"
#include "temp_dir.h"
#include "lock_file.h"

namespace dlock::file {
namespace {

class FenceCounter : public ::testing::Test {
 protected:
  UniqueFd open_file() {
    UniqueFd fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    EXPECT_TRUE(fd.valid());
    return fd;
  }
  void write_slot(int fd, int slot, std::uint64_t value, std::uint64_t check) {
    unsigned char buf[16];
    for (int i = 0; i < 8; ++i) {
      buf[i] = static_cast<unsigned char>(value >> (8 * i));
      buf[8 + i] = static_cast<unsigned char>(check >> (8 * i));
    }
    ASSERT_EQ(::pwrite(fd, buf, sizeof buf, slot * 16), 16);
  }

  testing::TempDir dir_;
  std::string path_ = dir_.path() + "/n-x.lock";
};

TEST_F(FenceCounter, StartsAtZeroAndIncrements) {
  UniqueFd fd = open_file();
  EXPECT_EQ(read_fence_counter(fd.get(), path_.c_str()), 0u);
  for (std::uint64_t want = 1; want <= 5; ++want) {
    EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), want % 2 == 0), want);
  }
  EXPECT_EQ(read_fence_counter(fd.get(), path_.c_str()), 5u);
}

TEST_F(FenceCounter, FloorLiftsTheCounterButNeverLowersIt) {
  UniqueFd fd = open_file();
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false, 1000), 1000u);
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false, 10), 1001u);
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false, 5000), 5000u);
  EXPECT_GT(wall_clock_floor(), 1'600'000'000'000'000u);  // microseconds, after 2020
}

TEST_F(FenceCounter, PersistsAcrossDescriptors) {
  {
    UniqueFd fd = open_file();
    bump_fence_counter(fd.get(), path_.c_str(), true);
    bump_fence_counter(fd.get(), path_.c_str(), true);
  }
  UniqueFd fd = open_file();
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), true), 3u);
}

TEST_F(FenceCounter, TornWriteOfTheOtherSlotNeverGoesBackwards) {
  UniqueFd fd = open_file();
  for (int i = 0; i < 7; ++i) bump_fence_counter(fd.get(), path_.c_str(), false);
  // 7 lives in one slot, 6 in the other; a torn update would have hit the slot holding 6.
  int slot_of_6 = -1;
  for (int s = 0; s < 2; ++s) {
    unsigned char b[8];
    ASSERT_EQ(::pread(fd.get(), b, 8, s * 16), 8);
    if (b[0] == 6) slot_of_6 = s;
  }
  ASSERT_NE(slot_of_6, -1);
  write_slot(fd.get(), slot_of_6, 8, fence_check(6));  // new value, old check: torn
  EXPECT_EQ(read_fence_counter(fd.get(), path_.c_str()), 7u);
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false), 8u);
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false), 9u);
}

TEST_F(FenceCounter, TornFirstWriteOfANewFileStartsOver) {
  UniqueFd fd = open_file();
  write_slot(fd.get(), 1, 1, 0x1234);  // first update torn; slot 0 still all zero
  EXPECT_EQ(read_fence_counter(fd.get(), path_.c_str()), 0u);
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false), 1u);
}

TEST_F(FenceCounter, ForeignContentIsReportedNotGuessed) {
  UniqueFd fd = open_file();
  write_slot(fd.get(), 0, 5, 5);
  write_slot(fd.get(), 1, 9, 9);
  try {
    bump_fence_counter(fd.get(), path_.c_str(), false);
    FAIL() << "corrupt counter accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
    EXPECT_NE(e.message().find("corrupt"), std::string::npos);
  }
}

// An exclusive holder has no concurrent updater: it skips the counter range, so a peer
// stuck on that range (stopped mid-update by SIGSTOP, say) cannot delay it; a shared holder
// still waits for it and gives up after its bound.
TEST_F(FenceCounter, AnExclusiveHolderNeedsNoCounterLock) {
  UniqueFd fd = open_file();
  UniqueFd peer = open_file();
  ASSERT_TRUE(try_lock_range(peer.get(), Range::counter, RangeMode::exclusive, "peer"));
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false, 0, /*exclusive_holder=*/true), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(bump_fence_counter(fd.get(), path_.c_str(), false, 0, true), 2u);
}

}  // namespace
}  // namespace dlock::file
