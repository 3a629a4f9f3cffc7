// Identities: a random id per provider instance and the default owner (the calling thread).
#pragma once

#include <string>

namespace dlock::detail {

// 128 random bits as 32 hex digits, from std::random_device. Unique per provider instance,
// so owners of different processes and providers never collide (never a timestamp).
std::string random_client_id();

// The calling thread's owner id, "thread-<n>": unique for the life of the process, never
// reused after the thread exits (unlike std::thread::id).
std::string thread_owner();

}  // namespace dlock::detail
