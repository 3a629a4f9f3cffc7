// The fencing counter kept in the first 32 bytes of each lock file.
//
// Format: two 16-byte slots at offsets 0 and 16, each a little-endian u64 value followed by
// a little-endian u64 check = mix(value). A slot is valid when its check matches, or when
// all 16 bytes are zero (value 0: a new file). The counter is the largest valid value.
//
// Why two slots: an update writes value+1 into the slot that does *not* hold the current
// maximum (and, with fsync=true, fdatasync()s before the token is handed out). A write torn
// by a crash or power loss can only damage that other slot; the maximum survives in its
// slot, so the counter never goes backwards. Both slots invalid means someone else wrote the
// file: reported, never guessed. (A reader that does not take the counter lock may see the
// slot being written torn; it then reads the other, older slot: never a wrong value.)
//
// Each new value is max(current + 1, floor), and the backend passes the wall clock in
// microseconds as the floor. So tokens keep increasing even when the lock directory is wiped
// (a tmpfs after a reboot, an operator deleting files), as long as the clock does not step
// back past the last token and a name is not acquired more than once per microsecond on
// average since the wipe. Tokens therefore look like timestamps, not 1, 2, 3.
#pragma once

#include <cstdint>

namespace dlock::file {

// Increments the counter of the lock file open read-write on `fd` and returns the new
// value: max(current + 1, floor): one pread and one pwrite. With `durable`, fdatasync()s
// before returning. Shared holders update it concurrently, so unless `exclusive_holder`
// the update is serialized with other updaters of the same file (other processes
// included) through a short exclusive lock on Range::counter, waiting at most ~5 s for it;
// a holder of main in exclusive mode has no concurrent updater and skips that lock.
// REQUIRES: the caller holds Range::main of `fd` (exclusively if `exclusive_holder`), so
// successive holders get strictly increasing values. Throws Error(unavailable) on I/O
// failure or when the counter lock stays busy, Error(internal) when both slots are corrupt
// or the counter is exhausted. `path` is only for messages.
std::uint64_t bump_fence_counter(int fd, const char* path, bool durable,
                                 std::uint64_t floor = 0, bool exclusive_holder = false);

// The floor the backend uses: microseconds since the Unix epoch (wall clock).
std::uint64_t wall_clock_floor() noexcept;

// Reads the counter without changing it (0 for a new file). For tests and diagnostics.
// Throws like bump_fence_counter.
std::uint64_t read_fence_counter(int fd, const char* path);

// The check word stored next to `value`. Exposed for tests that forge torn slots.
std::uint64_t fence_check(std::uint64_t value) noexcept;

}  // namespace dlock::file
