#include "dlock/duration.h"

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

#include "dlock/error.h"

namespace dlock {
namespace {

constexpr double kMaxMs = static_cast<double>(kLongestDuration.count());

[[noreturn]] void bad(std::string_view text, std::string_view why) {
  throw Error(ErrorCode::invalid_argument,
              "bad duration '" + std::string(text) + "': " + std::string(why) +
                  " (write e.g. 250ms, 5s, 1.5s, 2m, 1h)");
}

double unit_ms(std::string_view unit, std::string_view text) {
  if (unit == "us") return 0.001;
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  if (unit.empty()) bad(text, "a unit is required");
  bad(text, "unknown unit '" + std::string(unit) + "'");
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text) {
  std::size_t i = 0;
  bool digits = false, dot = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (text.empty()) bad(text, "empty");
  if (!text.empty() && text[0] == '-') bad(text, "negative");
  if (!digits) bad(text, "no number");
  // std::from_chars reads '.' whatever the process locale (std::stod would stop at the '.'
  // under a comma-decimal locale such as de_DE and turn "1.5s" into 1 s).
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, value, std::chars_format::fixed);
  if (ec == std::errc::result_out_of_range) bad(text, "too large");
  if (ec != std::errc() || end != text.data() + i) bad(text, "bad number");
  double ms = value * unit_ms(text.substr(i), text);
  if (!(ms <= kMaxMs)) bad(text, "too large");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(ms)));
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace dlock
