// `dlock` misuse: every mistake is one clear line on stderr and exit status 64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "process.h"

namespace dlock::cli::testing {
namespace {

void expect_usage_error(const Finished& r, const std::string& mentions) {
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.code, 64) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line expected: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliUsage, BadDurationIsNamed) {
  Sandbox box;
  expect_usage_error(box.run({"run", "--wait", "5x", "job", "--", "true"}), "5x");
  expect_usage_error(box.run({"run", "--wait", "5", "job", "--", "true"}), "'5'");
  expect_usage_error(box.run({"run", "--grace", "-1s", "job", "--", "true"}), "-1s");
  expect_usage_error(box.run({"run", "--lease", "0s", "job", "--", "true"}), "--lease");
}

TEST(CliUsage, UnknownSchemeIsNamedWithoutThePassword) {
  Sandbox box;
  auto r = box.run({"run", "--uri", "nope://alice:s3cret@host/x", "job", "--", "true"});
  expect_usage_error(r, "nope");
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
}

TEST(CliUsage, UriFileProblemsAreNamedWithoutTheFilesContent) {
  Sandbox box;
  expect_usage_error(box.run({"run", "--uri-file", (box.dir() / "absent").string(), "job", "--", "true"}),
                     "--uri-file");
  const auto empty = box.dir() / "empty";
  std::ofstream(empty) << "\n";
  expect_usage_error(box.run({"run", "--uri-file", empty.string(), "job", "--", "true"}), "no URI");
  expect_usage_error(
      box.run({"run", "--uri", "mem://", "--uri-file", empty.string(), "job", "--", "true"}), "exclude");
  const auto secret = box.dir() / "secret";
  std::ofstream(secret) << "nope://alice:s3cret@host/x\n";
  auto r = box.run({"run", "--uri-file", secret.string(), "job", "--", "true"});
  expect_usage_error(r, "nope");
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
}

TEST(CliUsage, HelpOffersOnlyCompiledInSchemes) {
  Sandbox box;
  auto r = box.run({"run", "--help"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::size_t list = r.out.find("Schemes compiled in:");
  ASSERT_NE(list, std::string::npos) << r.out;
  const std::string compiled = r.out.substr(list);
  EXPECT_NE(compiled.find("file://"), std::string::npos) << compiled;
  // Every "scheme://" the help shows anywhere is one this binary has.
  for (std::size_t at = r.out.find("://"); at != std::string::npos; at = r.out.find("://", at + 3)) {
    std::size_t begin = at;
    while (begin > 0 && (std::isalnum(static_cast<unsigned char>(r.out[begin - 1])) || r.out[begin - 1] == '+')) {
      --begin;
    }
    const std::string scheme = r.out.substr(begin, at + 3 - begin);
    EXPECT_NE(compiled.find("\n  " + scheme), std::string::npos) << scheme << " is offered but not compiled in";
  }
}

TEST(CliUsage, MissingSeparatorOrCommand) {
  Sandbox box;
  expect_usage_error(box.run({"run", "job", "true"}), "--");
  expect_usage_error(box.run({"run", "job"}), "--");
  expect_usage_error(box.run({"run", "job", "--"}), "no command");
  expect_usage_error(box.run({"run", "--", "true"}), "NAME");
  expect_usage_error(box.run({"run", "--bogus", "job", "--", "true"}), "--bogus");
  expect_usage_error(box.run({}), "subcommand");
}

TEST(CliUsage, EmptyNameIsRejected) {
  Sandbox box;
  auto r = box.run({"run", "--uri", box.file_uri(), "", "--", "true"});
  EXPECT_EQ(r.code, 64) << r.err;
}

TEST(CliUsage, HelpDocumentsEnvironmentAndExitCodes) {
  Sandbox box;
  auto r = box.run({"run", "--help"});
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* s : {"DLOCK_NAME", "DLOCK_FENCING_TOKEN", "DLOCK_URI", "XDG_RUNTIME_DIR", "--wait",
                        "--lease", "--max-hold", "--shared", "--grace", "75", "64", "69", "70", "127"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << "--help should mention " << s;
  }
  auto top = box.run({"--help"});
  EXPECT_EQ(top.code, 0);
  EXPECT_NE(top.out.find("run"), std::string::npos);
}

}  // namespace
}  // namespace dlock::cli::testing
