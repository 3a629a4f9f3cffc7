// One process-wide background thread for the zookeeper backend's slow or retried work:
// closing dead session handles (zookeeper_close blocks while it flushes and joins the
// handle's driver thread, and must never run on that thread) and the
// retries of guaranteed deletes. Callers never block on it: a HeldLock destructor, a
// completion callback and an abandoned acquire all just post.
#pragma once

#include <chrono>
#include <functional>

namespace dlock::zookeeper {

using Clock = std::chrono::steady_clock;

// Runs `job` on the worker thread at or after `at`. Jobs run one at a time, in due order.
// After process exit has begun (the worker's static destructor ran), runs `job` inline.
void post(std::function<void()> job, Clock::time_point at = Clock::now());

}  // namespace dlock::zookeeper
