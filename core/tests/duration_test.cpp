#include <gtest/gtest.h>

#include "dlock/duration.h"
#include "dlock/error.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("5s"), milliseconds(5000));
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1500));
  EXPECT_EQ(parse_duration("2m"), milliseconds(120000));
  EXPECT_EQ(parse_duration("1h"), milliseconds(3600000));
  EXPECT_EQ(parse_duration("0s"), milliseconds(0));
  EXPECT_EQ(parse_duration("10us"), milliseconds(1));  // never rounds a wait down to "none"
}

TEST(Duration, RejectsBadTextNamingIt) {
  for (const char* bad : {"", "5", "s", "-1s", "5 s", "5sec", "1.2.3s", "99999999h", "nan"}) {
    try {
      parse_duration(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Duration, FormatsTheShortestExactSpelling) {
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
  EXPECT_EQ(format_duration(milliseconds(5000)), "5s");
  EXPECT_EQ(format_duration(milliseconds(120000)), "2m");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
}

}  // namespace
}  // namespace dlock
