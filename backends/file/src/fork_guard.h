// Telling a forked child from its parent without a system call.
//
// A child created by fork() shares its parent's open file descriptions, hence their OFD
// locks: a descriptor inherited from the parent must never be locked, unlocked or reused in
// the child, or the two processes would share one hold.
#pragma once

#include <cstdint>

namespace dlock::file {

// A number that changes in the child at every fork() (a pthread_atfork handler). Record it
// with a descriptor; a different value later means this is a forked child of the process
// that recorded it. The first call registers the handler: call it before any fork that
// matters (the backend does in its constructor). Thread-safe, never throws.
std::uint64_t fork_generation() noexcept;

}  // namespace dlock::file
