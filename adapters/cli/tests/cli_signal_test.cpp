// `dlock run` and signals: forwarding to the command, cancelling a wait, a lost lock.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "process.h"

namespace dlock::cli::testing {
namespace {

using std::chrono::milliseconds;

// Whether `pid` blocks SIGINT (dlock blocks the signals it reads from a signalfd before it
// starts waiting for the lock): a SIGINT sent from then on is dlock's to handle.
bool blocks_sigint(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGINT - 1)) & 1;
  }
  return false;
}

bool eventually_blocks_sigint(pid_t pid) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!blocks_sigint(pid)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

TEST(CliSignals, SigtermIsForwardedAndTheCommandsStatusReturned) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  pid_t p = box.start({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c",
                       "trap 'echo trapped; exit 3' TERM; touch '" + ready.string() +
                           "'; while :; do sleep 0.05; done"});
  ASSERT_TRUE(box.wait_ready(p, ready)) << box.wait(p).err;
  ::kill(p, SIGTERM);
  auto r = box.wait(p, milliseconds(5000));
  EXPECT_TRUE(r.exited) << "dlock must not die of the signal itself";
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, "trapped\n");
  auto after = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(after.code, 0) << after.err;
}

TEST(CliSignals, SigintIsForwarded) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  pid_t p = box.start({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c",
                       "touch '" + ready.string() + "'; exec sleep 30"});
  ASSERT_TRUE(box.wait_ready(p, ready)) << box.wait(p).err;
  ::kill(p, SIGINT);
  auto r = box.wait(p, milliseconds(5000));
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.code, 128 + SIGINT) << r.err;
}

TEST(CliSignals, ASignalWhileWaitingCancelsTheWait) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  pid_t holder = box.start({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c",
                            "touch '" + ready.string() + "'; exec sleep 30"});
  ASSERT_TRUE(box.wait_ready(holder, ready)) << box.wait(holder).err;
  pid_t waiter = box.start({"run", "--uri", box.file_uri(), "job", "--", "touch",
                            (box.dir() / "waiter-ran").string()});
  ASSERT_TRUE(eventually_blocks_sigint(waiter)) << "dlock never blocked SIGINT to read it";
  std::this_thread::sleep_for(milliseconds(100));  // most likely waiting by now (either way: cancelled)
  ::kill(waiter, SIGINT);
  auto r = box.wait(waiter, milliseconds(3000));
  EXPECT_TRUE(r.exited) << "dlock must handle the signal, not die of it";
  EXPECT_EQ(r.code, 128 + SIGINT) << r.err;
  EXPECT_FALSE(std::filesystem::exists(box.dir() / "waiter-ran"));
  ::kill(holder, SIGTERM);
  EXPECT_EQ(box.wait(holder).code, 128 + SIGTERM);
}

TEST(CliSignals, LostLockStopsTheCommandWithSigtermAndExits70) {
  // An explicit --lease is never renewed: the lock is lost; --max-hold stops the command
  // (and then releases the lock): both exit 70.
  for (const std::string option : {"--max-hold", "--lease"})
  for (const std::string uri : {"mem://", "file"}) {
    SCOPED_TRACE(option + " " + uri);
    Sandbox box;
    std::string u = uri == "file" ? box.file_uri() : uri;
    // `wait` returns at once for a trapped signal: at --max-hold the trap runs long before
    // the SIGKILL (--grace 5s). A --lease that runs out is lost a margin before its end,
    // which is also when the command must be dead: SIGKILL follows SIGTERM at once, and the
    // trap may or may not get to run.
    auto r = box.run({"run", "--uri", u, option, "300ms", "job", "--", "sh", "-c",
                      "trap 'echo stopped; exit 0' TERM; while :; do sleep 0.05 & wait $!; done"},
                     {}, milliseconds(10000));
    EXPECT_TRUE(r.exited);
    EXPECT_EQ(r.code, 70) << r.err;
    if (option == "--max-hold") {
      EXPECT_EQ(r.out, "stopped\n");
    }
    EXPECT_NE(r.err.find(option == "--lease" ? "lost" : "held for --max-hold"), std::string::npos) << r.err;
    EXPECT_GE(r.elapsed, milliseconds(250));
    EXPECT_LT(r.elapsed, milliseconds(4000));
  }
}

TEST(CliSignals, ACommandIgnoringSigtermIsKilledAfterTheGrace) {
  Sandbox box;
  auto r = box.run({"run", "--uri", "mem://", "--max-hold", "200ms", "--grace", "300ms", "job", "--", "sh",
                    "-c", "trap '' TERM; while :; do sleep 0.05; done"});
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.code, 70) << r.err;
  EXPECT_GE(r.elapsed, milliseconds(450));
  EXPECT_LT(r.elapsed, milliseconds(4000));
}

// Once the lock may be granted to someone else, the command must not run on: a command that
// ignores SIGTERM is killed a margin before the lease ends, however long --grace is.
TEST(CliSignals, ALostLocksCommandIsKilledWhenTheLeaseEndsNotAfterTheWholeGrace) {
  Sandbox box;
  auto r = box.run({"run", "--uri", "mem://", "--lease", "300ms", "--grace", "8s", "job", "--", "sh", "-c",
                    "trap '' TERM; while :; do sleep 0.05; done"},
                   {}, milliseconds(15000));
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.code, 70) << r.err;
  EXPECT_LT(r.elapsed, milliseconds(3000)) << "the command ran on after its lease ended: " << r.err;
}

// --max-hold stops the command, but the lock stays held until the command is gone: nobody
// else may run the job while a command that ignores SIGTERM still does.
TEST(CliSignals, MaxHoldKeepsTheLockUntilTheCommandIsGone) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  pid_t p = box.start({"run", "--uri", box.file_uri(), "--max-hold", "300ms", "--grace", "2s", "job", "--", "sh",
                       "-c", "trap '' TERM; touch '" + ready.string() + "'; while :; do sleep 0.05; done"});
  ASSERT_TRUE(box.wait_ready(p, ready)) << box.wait(p).err;
  std::this_thread::sleep_for(milliseconds(1000));  // past --max-hold, within --grace
  auto other = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(other.code, 75) << "another dlock ran the job while the first command still ran: " << other.err;
  auto r = box.wait(p, milliseconds(10000));
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.code, 70) << r.err;
  EXPECT_GE(r.elapsed, milliseconds(2000)) << "killed before --max-hold + --grace";
  auto after = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(after.code, 0) << "not released once the command was gone: " << after.err;
}

// "R", "S", "T"...: the state letter of /proc/PID/stat.
char process_state(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  std::size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// SIGTSTP to dlock (a `kill -TSTP`, a job-control stop) must not stop dlock while its command
// runs on: its watchdog would stop renewing and the lock go to someone else. The command's
// group stops instead, the lock still held; SIGCONT continues it.
TEST(CliSignals, SigtstpStopsTheCommandNotDlockAndTheLockStaysHeld) {
  Sandbox box;
  auto ready = box.dir() / "ready";
  auto ticks = box.dir() / "ticks";
  pid_t p = box.start({"run", "--uri", box.file_uri(), "job", "--", "sh", "-c",
                       "touch '" + ready.string() + "'; while :; do echo t >> '" + ticks.string() +
                           "'; sleep 0.02; done"});
  ASSERT_TRUE(box.wait_ready(p, ready)) << box.wait(p).err;
  ::kill(p, SIGTSTP);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_NE(process_state(p), 'T') << "dlock itself stopped: its lock would lapse while the command ran";
  const std::size_t frozen = read_file(ticks).size();
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(read_file(ticks).size(), frozen) << "the command kept running after SIGTSTP";
  auto other = box.run({"run", "--uri", box.file_uri(), "--wait", "0", "job", "--", "true"});
  EXPECT_EQ(other.code, 75) << "the lock was free while the command was stopped: " << other.err;
  ::kill(p, SIGCONT);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_GT(read_file(ticks).size(), frozen) << "SIGCONT did not continue the command";
  ::kill(p, SIGTERM);
  auto r = box.wait(p, milliseconds(5000));
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
}

}  // namespace
}  // namespace dlock::cli::testing
