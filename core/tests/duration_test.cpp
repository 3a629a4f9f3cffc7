#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

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

// Switches LC_ALL to a locale whose decimal separator is ',' (de_DE): an installed one, else
// one compiled with localedef (package `locales`) into a per-user cache directory that
// LOCPATH points at. Returns its name, or "" if none can be had. The destructor restores "C".
class CommaLocale {
 public:
  CommaLocale() {
    for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"}) {
      if (use(name)) return;
    }
    namespace fs = std::filesystem;
    const fs::path cache = fs::temp_directory_path() / ("dlock-test-locale-" + std::to_string(::getuid()));
    if (!fs::exists(cache / "de_DE.UTF-8")) {
      // Built aside and renamed into place, so concurrent test runs never see half a locale.
      std::string tmp = (fs::temp_directory_path() / "dlock-test-locale-XXXXXX").string();
      if (::mkdtemp(tmp.data()) == nullptr) return;
      const std::string cmd = "localedef -i de_DE -f UTF-8 '" + tmp + "/de_DE.UTF-8' >/dev/null 2>&1";
      (void)std::system(cmd.c_str());  // exits 1 on mere warnings: judged by setlocale below
      std::error_code ec;
      fs::rename(tmp, cache, ec);
      if (ec) fs::remove_all(tmp, ec);  // another run got there first
    }
    ::setenv("LOCPATH", cache.c_str(), 1);
    use("de_DE.UTF-8");
  }
  ~CommaLocale() { std::setlocale(LC_ALL, "C"); }
  CommaLocale(const CommaLocale&) = delete;
  CommaLocale& operator=(const CommaLocale&) = delete;

  const std::string& name() const { return name_; }

 private:
  bool use(const char* name) {
    if (std::setlocale(LC_ALL, name) == nullptr) return false;
    if (std::localeconv()->decimal_point != std::string(",")) {
      std::setlocale(LC_ALL, "C");
      return false;
    }
    name_ = name;
    return true;
  }
  std::string name_;
};

TEST(Duration, IgnoresTheProcessLocale) {
  CommaLocale comma;
  if (comma.name().empty()) {
    GTEST_SKIP() << "no comma-decimal locale installed and localedef could not build de_DE";
  }
  // The locale really is in force: the C library reads "1.5" as 1 here.
  EXPECT_EQ(std::strtod("1.5", nullptr), 1.0) << comma.name();
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1500)) << "under " << comma.name();
  EXPECT_EQ(parse_duration("0.25s"), milliseconds(250)) << "under " << comma.name();
  EXPECT_THROW(parse_duration("1,5s"), Error) << "',' is never a decimal separator";
}

TEST(Duration, FormatsTheShortestExactSpelling) {
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
  EXPECT_EQ(format_duration(milliseconds(5000)), "5s");
  EXPECT_EQ(format_duration(milliseconds(120000)), "2m");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
}

}  // namespace
}  // namespace dlock
