// Telling a forked child from its parent without a system call.
//
// A child created by fork() has copies of its parent's objects but none of its threads, and
// shares its open file descriptions (hence OFD locks and server connections): an object
// created in the parent must not join threads, lock mutexes that were held at fork time,
// release locks or talk on connections in the child.
#pragma once

#include <cstdint>

namespace dlock::spi {

// A number that changes in the child at every fork() (a pthread_atfork handler). The first
// call registers the handler: call it before any fork that matters. Thread-safe, never throws.
std::uint64_t fork_generation() noexcept;

// Remembers the generation it was created in.
class ForkGuard {
 public:
  ForkGuard() noexcept : generation_(fork_generation()) {}
  // True in a child forked (directly or not) after this object was created.
  bool in_forked_child() const noexcept { return fork_generation() != generation_; }

 private:
  std::uint64_t generation_;
};

}  // namespace dlock::spi
