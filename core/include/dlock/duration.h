// Human durations for URIs and the command line.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dlock {

// Parses "250ms", "5s", "1.5s", "2m", "1h", "10us" into milliseconds (sub-millisecond
// values round up to 1 ms so "10us" never becomes "no wait"). A unit is required.
// Throws Error(invalid_argument) naming the text for anything else: no unit, unknown unit,
// negative, empty, or larger than ~24 days.
std::chrono::milliseconds parse_duration(std::string_view text);

// "250ms", "5s", "2m" — the shortest exact spelling.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace dlock
