// Open-file-description byte-range locks (fcntl F_OFD_*): owned by the open file description,
// so two descriptors opened separately exclude each other even inside one process and one
// thread, and the kernel drops them when the last descriptor of the description closes
// (including at process death). Classic POSIX fcntl locks are per process and are dropped
// when *any* descriptor of the file is closed: never use them here.
#pragma once

namespace dlock::file {

// One lock file carries four independent one-byte ranges; the file's contents (the fencing
// counter) are unaffected by record locks.
enum class Range : long {
  gate = 0,     // writer preference: a writer holds it exclusively while it waits and holds
  main = 1,     // the lock itself: shared = readers, exclusive = writer
  counter = 2,  // serializes fencing-counter updates of shared holders (short exclusive holds)
  queue = 3,    // waiters hold it shared while they wait: a writer's first try then fails
};

enum class RangeMode { shared, exclusive };

// Tries once to lock `range` of `fd` (opened read-write). Returns true when locked, false
// when another description holds a conflicting lock. Re-locking a range this description
// already holds converts it (callers never do that on the gate or main range).
// Throws Error(unavailable) for any other failure; `path` is only for the message.
bool try_lock_range(int fd, Range range, RangeMode mode, const char* path);

// Tries once to lock the `count` consecutive ranges from `first` in one call: all or none.
bool try_lock_ranges(int fd, Range first, int count, RangeMode mode, const char* path);

// Blocks in the kernel (F_OFD_SETLKW) until the `count` ranges from `first` are locked, all
// or none. Returns 0, or the errno of a failure (EINTR is retried). The wait is the only
// place where the calling thread can be cancelled (pthread_cancel): cancellation is enabled
// around the system call and disabled again before returning. REQUIRES: the calling thread's
// cancellation state is disabled (it is left so). Not noexcept: a cancellation unwinds.
int wait_lock_ranges(int fd, Range first, int count, RangeMode mode);

// Unlocks the `count` consecutive ranges from `first` of `fd` (what is not held is
// ignored). Errors are ignored, as for unlock_range.
void unlock_ranges(int fd, Range first, int count) noexcept;

// Unlocks `range` of `fd`. Never fails in practice (F_UNLCK on a valid descriptor); errors
// are ignored. Unlock explicitly rather than count on close(): a forked child may share the
// open file description and keep its locks.
void unlock_range(int fd, Range range) noexcept;

}  // namespace dlock::file
