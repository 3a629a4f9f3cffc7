#include "fence_counter.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "dlock/error.h"
#include "range_lock.h"
#include "errors.h"

namespace dlock::file {
namespace {

constexpr std::size_t kSlotBytes = 16;
constexpr std::size_t kSlots = 2;

std::uint64_t load_le(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

void store_le(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

struct Slots {
  std::array<std::optional<std::uint64_t>, kSlots> value;
};

Slots read_slots(int fd, const char* path) {
  std::array<unsigned char, kSlotBytes * kSlots> buf{};
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("pread", path, errno);
    }
    if (n == 0) break;  // shorter file: the rest reads as zero (an empty slot)
    got += static_cast<std::size_t>(n);
  }
  Slots s;
  for (std::size_t i = 0; i < kSlots; ++i) {
    const unsigned char* p = buf.data() + i * kSlotBytes;
    std::uint64_t value = load_le(p);
    std::uint64_t check = load_le(p + 8);
    if (check == fence_check(value) || (value == 0 && check == 0)) s.value[i] = value;
  }
  return s;
}

// Largest valid slot and its index; throws when neither is valid.
std::pair<std::uint64_t, std::size_t> current(const Slots& s, const char* path) {
  std::optional<std::pair<std::uint64_t, std::size_t>> best;
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (s.value[i] && (!best || *s.value[i] > best->first)) best = {{*s.value[i], i}};
  }
  if (!best) {
    throw Error(ErrorCode::internal,
                std::string("file://: fencing counter in ") + path +
                    " is corrupt (both slots fail their check); the file was written by "
                    "something else than dlock");
  }
  return *best;
}

// Takes Range::counter exclusively, waiting with a short backoff: holders keep it only for
// one read, write and fdatasync. A bounded wait rather than F_OFD_SETLKW, so a stopped
// (SIGSTOP) peer cannot hang us forever.
void lock_counter(int fd, const char* path) {
  using namespace std::chrono;
  auto deadline = steady_clock::now() + seconds(5);
  auto pause = microseconds(50);
  while (!try_lock_range(fd, Range::counter, RangeMode::exclusive, path)) {
    if (steady_clock::now() >= deadline) {
      throw Error(ErrorCode::unavailable,
                  std::string("file://: fencing counter of ") + path + " stayed busy for 5s");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<microseconds>(pause * 2, milliseconds(2));
  }
}

struct CounterGuard {
  int fd;  // -1: nothing to unlock
  ~CounterGuard() {
    if (fd >= 0) unlock_range(fd, Range::counter);
  }
};

}  // namespace

std::uint64_t fence_check(std::uint64_t value) noexcept {
  // splitmix64's finalizer over a salted value: any torn mix of two slots fails it.
  std::uint64_t z = value ^ 0x646c6f636b66656eULL;  // "dlockfen"
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t read_fence_counter(int fd, const char* path) {
  lock_counter(fd, path);
  CounterGuard guard{fd};
  return current(read_slots(fd, path), path).first;
}

std::uint64_t wall_clock_floor() noexcept {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  return us > 0 ? static_cast<std::uint64_t>(us) : 0;
}

std::uint64_t bump_fence_counter(int fd, const char* path, bool durable, std::uint64_t floor,
                                 bool exclusive_holder) {
  if (!exclusive_holder) lock_counter(fd, path);
  CounterGuard guard{exclusive_holder ? -1 : fd};
  auto [value, slot] = current(read_slots(fd, path), path);
  if (value == std::numeric_limits<std::uint64_t>::max()) {
    throw Error(ErrorCode::internal, std::string("file://: fencing counter of ") + path +
                                         " is exhausted");
  }
  std::uint64_t next = std::max(value + 1, floor);
  std::array<unsigned char, kSlotBytes> buf{};
  store_le(buf.data(), next);
  store_le(buf.data() + 8, fence_check(next));
  auto offset = static_cast<off_t>((1 - slot) * kSlotBytes);  // the slot not holding the max
  for (;;) {
    ssize_t n = ::pwrite(fd, buf.data(), buf.size(), offset);
    if (n == static_cast<ssize_t>(buf.size())) break;
    if (n < 0 && errno == EINTR) continue;
    // A short write of 16 bytes means the disk is full; the old maximum stays valid.
    throw sys_error("pwrite", path, n < 0 ? errno : ENOSPC);
  }
  if (durable) {
    while (::fdatasync(fd) != 0) {
      if (errno != EINTR) throw sys_error("fdatasync", path, errno);
    }
  }
  return next;
}

}  // namespace dlock::file
