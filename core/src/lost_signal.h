// What may happen on the thread that fires a lost signal. Private to the core.
//
// HeldLock::mark_lost runs the holders' lost callbacks on the thread that noticed the
// loss: the watchdog's, a user's, or a backend's own (a pool's monitor, a client library's
// event thread). A callback may drop or release its Lease there. Nothing that does may
// then block that thread on the backend (a backend's answer may need that very thread),
// end the provider on it (its backend's destructor would join the thread it runs on), or
// destroy the callback that is running.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <vector>

namespace dlock::detail {

using LostCallback = std::stop_callback<std::function<void()>>;

// Requests stop on `lost` (runs every callback registered on it) as a lost signal.
void fire_lost_signal(std::stop_source& lost) noexcept;

// True while this thread fires a lost signal (in a callback, or in what one destroys).
bool firing_lost_signal() noexcept;

// Destroys `callbacks` (unregisters them): now, or, while this thread fires a lost signal
// (one of them may be the callback running), once the signal's callbacks have all run.
void retire(std::vector<std::unique_ptr<LostCallback>>&& callbacks) noexcept;

}  // namespace dlock::detail
