// `dlock run` end to end: exit statuses, environment, waiting, the default lock directory.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "process.h"

namespace dlock::cli::testing {
namespace {

using std::chrono::milliseconds;

TEST(CliRun, PassesTheCommandsExitStatusThrough) {
  Sandbox box;
  auto ok = box.run({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c", "exit 0"});
  EXPECT_TRUE(ok.exited);
  EXPECT_EQ(ok.code, 0) << ok.err;
  auto seven = box.run({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c", "exit 7"});
  EXPECT_TRUE(seven.exited);
  EXPECT_EQ(seven.code, 7) << seven.err;
}

TEST(CliRun, ACommandKilledBySignalGives128PlusSignal) {
  Sandbox box;
  auto r = box.run({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c", "kill -KILL $$"});
  EXPECT_TRUE(r.exited);  // dlock itself exits normally
  EXPECT_EQ(r.code, 128 + 9) << r.err;
}

TEST(CliRun, CommandSeesNameAndIncreasingFencingTokens) {
  Sandbox box;
  const std::vector<std::string> cmd = {"run", "--uri", box.file_uri(), "order:42", "--", "sh", "-c",
                                        "printf '%s %s' \"$DLOCK_NAME\" \"$DLOCK_FENCING_TOKEN\""};
  // A stale value in dlock's own environment must not leak through.
  auto first = box.run(cmd, {{"DLOCK_FENCING_TOKEN", "999999999"}, {"DLOCK_NAME", "bogus"}});
  auto second = box.run(cmd);
  ASSERT_EQ(first.code, 0) << first.err;
  ASSERT_EQ(second.code, 0) << second.err;
  ASSERT_TRUE(first.out.starts_with("order:42 ")) << first.out;
  ASSERT_TRUE(second.out.starts_with("order:42 ")) << second.out;
  unsigned long long t1 = std::stoull(first.out.substr(9));
  unsigned long long t2 = std::stoull(second.out.substr(9));
  EXPECT_GT(t1, 0u);
  EXPECT_NE(t1, 999999999u);  // ours, not the stale value from the environment
  EXPECT_GT(t2, t1);
}

TEST(CliRun, GivesUpWith75AfterTheWaitWhileAnotherProcessHoldsTheLock) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  pid_t holder = box.start({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c",
                            "touch '" + ready.string() + "'; exec sleep 30"});
  ASSERT_TRUE(box.wait_ready(holder, ready)) << box.wait(holder).err;

  auto timed = box.run({"run", "--uri", box.file_uri(), "--wait", "200ms", "job", "--", "true"});
  EXPECT_TRUE(timed.exited);
  EXPECT_EQ(timed.code, 75) << timed.err;
  EXPECT_GE(timed.elapsed, milliseconds(190));
  EXPECT_LT(timed.elapsed, milliseconds(1500));
  EXPECT_NE(timed.err.find("not acquired"), std::string::npos) << timed.err;

  auto once = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(once.code, 75) << once.err;
  EXPECT_LT(once.elapsed, milliseconds(1000));

  // Another name is independent.
  auto other = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "other", "--", "true"});
  EXPECT_EQ(other.code, 0) << other.err;

  ::kill(holder, SIGTERM);
  auto held = box.wait(holder, milliseconds(5000));
  EXPECT_EQ(held.code, 128 + SIGTERM) << held.err;
  auto after = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(after.code, 0) << "the lock must be free once the holder exited: " << after.err;
}

TEST(CliRun, AWaiterRunsAsSoonAsTheHolderFinishes) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  pid_t holder = box.start({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c",
                            "touch '" + ready.string() + "'; sleep 0.5"});
  ASSERT_TRUE(box.wait_ready(holder, ready)) << box.wait(holder).err;
  auto waiter = box.run({"run", "--uri", box.file_uri(), "--wait", "10s", "job", "--", "echo", "mine"});
  EXPECT_EQ(waiter.code, 0) << waiter.err;
  EXPECT_EQ(waiter.out, "mine\n");
  EXPECT_GE(waiter.elapsed, milliseconds(300));
  EXPECT_LT(waiter.elapsed, milliseconds(5000));
  EXPECT_EQ(box.wait(holder).code, 0);
}

TEST(CliRun, SharedHoldsCoexistAndKeepWritersOut) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  pid_t reader = box.start({"run", "--uri", box.file_uri(), "--shared", "table", "--", "sh", "-c",
                            "touch '" + ready.string() + "'; exec sleep 30"});
  ASSERT_TRUE(box.wait_ready(reader, ready)) << box.wait(reader).err;
  auto second = box.run({"run", "--uri", box.file_uri(), "--shared", "--wait", "0", "table", "--", "true"});
  EXPECT_EQ(second.code, 0) << second.err;
  auto writer = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "table", "--", "true"});
  EXPECT_EQ(writer.code, 75) << writer.err;
  EXPECT_NE(writer.err.find("not acquired"), std::string::npos) << writer.err;
  ::kill(reader, SIGTERM);
  EXPECT_EQ(box.wait(reader).code, 128 + SIGTERM);
}

TEST(CliRun, MissingCommandGives127) {
  Sandbox box;
  auto r = box.run({"run", "--uri", box.file_uri(), "job", "--", "no-such-command-dlock-test"});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("no-such-command-dlock-test"), std::string::npos) << r.err;
  auto after = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(after.code, 0) << "the lock must have been released: " << after.err;
}

TEST(CliRun, ACommandThatCannotBeExecutedGives126AndFreesTheLock) {
  Sandbox box;
  const auto script = box.dir() / "not-executable";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";  // mode 0644: no execute permission
  auto r = box.run({"run", "--uri", box.file_uri(), "job", "--", script.string()});
  EXPECT_EQ(r.code, 126) << r.err;
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  auto after = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(after.code, 0) << "the lock must have been released: " << after.err;
}

TEST(CliRun, DefaultUriIsAPrivateDirUnderXdgRuntimeDir) {
  Sandbox box;
  auto r = box.run({"run", "-v", "job", "--", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat((box.dir() / "dlock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE(r.err.find("file://"), std::string::npos) << r.err;
}

TEST(CliRun, DlockUriEnvironmentVariableIsUsed) {
  Sandbox box;
  auto r = box.run({"run", "-v", "job", "--", "true"}, {{"DLOCK_URI", "mem://"}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("mem://"), std::string::npos) << r.err;
}

TEST(CliRun, UriFileGivesTheUriOffTheCommandLine) {
  Sandbox box;
  const auto file = box.dir() / "uri";
  std::ofstream(file) << "  " << box.file_uri() << "  \n# a comment line is ignored\n";
  auto ready = box.dir() / "ready";
  pid_t holder = box.start({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c",
                            "touch '" + ready.string() + "'; exec sleep 30"});
  ASSERT_TRUE(box.wait_ready(holder, ready)) << box.wait(holder).err;
  auto busy = box.run({"run", "--uri-file", file.string(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(busy.code, 75) << "--uri-file must name the same lock service: " << busy.err;
  ::kill(holder, SIGTERM);
  box.wait(holder);
  auto r = box.run({"run", "--uri-file", file.string(), "job", "--", "sh", "-c", "printf %s \"$DLOCK_URI\""});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, box.file_uri()) << "the command sees the (redacted) URI in use";
}

TEST(CliRun, TheCommandSeesTheUriInUseNotAnInheritedOne) {
  Sandbox box;
  auto r = box.run({"run", "--uri", "mem://", "job", "--", "sh", "-c", "printf %s \"$DLOCK_URI\""},
                   {{"DLOCK_URI", box.file_uri()}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "mem://");
}

// A command may run dlock again with the DLOCK_URI it got: that must name the same lock
// service, whatever bytes the directory's name holds (given percent-encoded, as a URI must).
TEST(CliRun, ANestedDlockRunWithTheInheritedUriSeesTheSameLocks) {
  Sandbox box;
  for (const std::string name : {"pct%41", "has space", "q?x#y"}) {
    const auto dir = box.dir() / name;
    std::filesystem::create_directory(dir);
    std::string encoded;
    for (unsigned char c : dir.string()) {
      if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.') {
        encoded += static_cast<char>(c);
      } else {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", c);
        encoded += hex;
      }
    }
    // The outer dlock holds `job`; the nested one tries it once: busy (75).
    auto r = box.run({"run", "--uri", "file://" + encoded, "job", "--", "sh", "-c",
                      "\"$0\" run --wait 0 job -- true; printf %s $?", DLOCK_CLI_PATH});
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, "75") << name << ": the nested dlock run did not see the outer's lock: " << r.err;
  }
}

TEST(CliRun, AnUnusableLockServiceGives69) {
  Sandbox box;
  auto r = box.run({"run", "--uri", "file:///proc/no-such-dir/locks", "job", "--", "true"});
  EXPECT_EQ(r.code, 69) << r.err;
  EXPECT_TRUE(r.err.starts_with("dlock: unavailable")) << r.err;
  EXPECT_LT(r.elapsed, std::chrono::seconds(5));
}

TEST(CliRun, RefusesADefaultDirOthersCanWrite) {
  Sandbox box;
  std::filesystem::create_directory(box.dir() / "dlock");
  ::chmod((box.dir() / "dlock").c_str(), 0777);
  auto r = box.run({"run", "job", "--", "true"});
  EXPECT_EQ(r.code, 69) << r.err;
  EXPECT_NE(r.err.find("0700"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dlock::cli::testing
