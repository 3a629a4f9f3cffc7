// Human durations for URIs and the command line.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dlock {

// The longest lease, hold limit or URI duration dlock takes: 24 days, which fits every
// backend's time types (31-bit millisecond timeouts, microsecond server timestamps). (A
// longer wait is a wait forever.)
inline constexpr std::chrono::milliseconds kLongestDuration{24LL * 24 * 3600 * 1000};

// The shortest lease dlock takes (from a URI's lease=, AcquireOptions::lease or extend()):
// a lease is renewed every third of it, and shorter ones left the watchdog renewing without
// a pause.
inline constexpr std::chrono::milliseconds kShortestLease{10};

// Parses "250ms", "5s", "1.5s", "2m", "1h", "10us" into milliseconds (sub-millisecond
// values round up to 1 ms so "10us" never becomes "no wait"). A unit is required.
// Throws Error(invalid_argument) naming the text for anything else: no unit, unknown unit,
// negative, empty, or longer than kLongestDuration.
std::chrono::milliseconds parse_duration(std::string_view text);

// "250ms", "5s", "2m" — the shortest exact spelling.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace dlock
