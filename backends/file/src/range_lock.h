// Open-file-description byte-range locks (fcntl F_OFD_*): owned by the open file description,
// so two descriptors opened separately exclude each other even inside one process and one
// thread, and the kernel drops them when the last descriptor of the description closes
// (including at process death). Classic POSIX fcntl locks are per process and are dropped
// when *any* descriptor of the file is closed: never use them here.
#pragma once

namespace dlock::file {

// One lock file carries three independent one-byte ranges; the file's contents (the fencing
// counter) are unaffected by record locks.
enum class Range : long {
  gate = 0,     // writer preference: a waiting writer holds it exclusively
  main = 1,     // the lock itself: shared = readers, exclusive = writer
  counter = 2,  // serializes fencing-counter updates (short exclusive holds)
};

enum class RangeMode { shared, exclusive };

// Tries once to lock `range` of `fd` (opened read-write). Returns true when locked, false
// when another description holds a conflicting lock. Re-locking a range this description
// already holds converts it (callers never do that on the gate or main range).
// Throws Error(unavailable) for any other failure; `path` is only for the message.
bool try_lock_range(int fd, Range range, RangeMode mode, const char* path);

// Unlocks `range` of `fd`. Never fails in practice; errors are ignored (closing the
// descriptor drops the lock anyway).
void unlock_range(int fd, Range range) noexcept;

}  // namespace dlock::file
