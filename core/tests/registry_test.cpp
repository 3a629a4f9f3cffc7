#include <gtest/gtest.h>

#include <algorithm>

#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/spi/registrar.h"

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

// What a second copy of a backend's registrar does (two shared libraries that each link
// dlock statically): no exception out of a static initializer, and the first factory stays.
TEST(Registry, BackendRegistrarRunningTwiceKeepsTheFirstFactory) {
  int second_copy_opened = 0;
  ProviderFactory second_copy = [&](const Uri&) {
    ++second_copy_opened;
    return std::shared_ptr<ILockProvider>();
  };
  bool registered = true;
  EXPECT_NO_THROW(registered = spi::register_schemes({"mem"}, second_copy));
  EXPECT_FALSE(registered);
  EXPECT_TRUE(open("mem://registrar-twice"));
  EXPECT_EQ(second_copy_opened, 0);

  // A new scheme is registered, with every alias, even next to one that exists.
  EXPECT_FALSE(spi::register_schemes({"registrar-test", "mem", "registrar-test+alias"}, second_copy));
  EXPECT_FALSE(open("registrar-test://"));
  EXPECT_FALSE(open("registrar-test+alias://"));
  EXPECT_EQ(second_copy_opened, 2);
  EXPECT_FALSE(spi::register_schemes({"registrar-test"}, second_copy));
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
