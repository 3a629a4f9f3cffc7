#include <gtest/gtest.h>

#include <algorithm>

#include "dlock/error.h"
#include "dlock/open.h"

namespace dlock {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Registry, CompiledInBackendsAreRegistered) {
  auto schemes = registered_schemes();
  EXPECT_TRUE(has(schemes, "mem"));
  EXPECT_TRUE(std::is_sorted(schemes.begin(), schemes.end()));
}

TEST(Registry, UnknownSchemeNamesTheSchemesThatExist) {
  try {
    open("nosuch://u:topsecret@host:1/");
    FAIL() << "unknown scheme opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown scheme 'nosuch'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mem://"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("topsecret"), std::string::npos) << msg;
  }
}

TEST(Registry, UnknownSchemeShowsNoParameterValue) {
  try {
    open("nosuch://host:1/?pw=hunter2");
    FAIL() << "unknown scheme opened";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

TEST(Registry, SchemeCannotBeRegisteredTwice) {
  EXPECT_THROW(register_scheme("mem", [](const Uri&) { return std::shared_ptr<ILockProvider>(); }), Error);
}

TEST(Registry, OpensMemWithParameters) {
  auto p = open("mem://registry-test?lease=2s");
  EXPECT_EQ(p->uri(), "mem://registry-test?lease=2s");
  EXPECT_EQ(p->capabilities().default_lease, std::chrono::milliseconds(2000));
  EXPECT_THROW(open("mem://?lease=2s&bogus=1"), Error);
  EXPECT_THROW(open("mem://x:1"), Error);
}

}  // namespace
}  // namespace dlock
