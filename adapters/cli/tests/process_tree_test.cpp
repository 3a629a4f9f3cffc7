// Which processes belong to a command's tree, on made-up snapshots of /proc (no process is
// signalled), and the parsing of /proc/PID/stat.
#include "process_tree.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

namespace dlock::cli {
namespace {

// A /proc/PID/stat line with these fields; the others as the kernel writes them.
std::string stat_line(pid_t pid, const std::string& comm, char state, pid_t ppid, pid_t pgrp,
                      unsigned long start) {
  return std::to_string(pid) + " (" + comm + ") " + state + " " + std::to_string(ppid) + " " +
         std::to_string(pgrp) + " 7 34816 8 4194560 120 0 0 0 1 2 0 0 20 0 1 0 " +
         std::to_string(start) + " 2400256 230 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0\n";
}

ProcessStat proc(pid_t pid, pid_t ppid, pid_t pgrp, char state = 'S', std::uint64_t start = 1000) {
  return {pid, ppid, pgrp, state, start};
}

TEST(ProcessTree, ParsesAStatLineWhoseCommandNameHoldsParenthesesAndSpaces) {
  auto p = parse_stat(stat_line(4242, "a) (b c) Z 1 1", 'S', 17, 4200, 987654321));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->pid, 4242);
  EXPECT_EQ(p->state, 'S');
  EXPECT_EQ(p->ppid, 17);
  EXPECT_EQ(p->pgrp, 4200);
  EXPECT_EQ(p->start, 987654321U);
  EXPECT_FALSE(parse_stat(""));
  EXPECT_FALSE(parse_stat("4242 (sh) S 17"));
  EXPECT_FALSE(parse_stat("x (sh) S 17 4200 7 34816 8 4194560 120 0 0 0 1 2 0 0 20 0 1 0 5"));
}

TEST(ProcessTree, ReadsThisProcess) {
  auto all = read_processes();
  ASSERT_TRUE(all);
  bool found = false;
  for (const ProcessStat& p : *all) {
    if (p.pid != ::getpid()) continue;
    found = true;
    EXPECT_EQ(p.ppid, ::getppid());
    EXPECT_EQ(p.pgrp, ::getpgrp());
    EXPECT_EQ(p.state, 'R');  // reading its own stat
  }
  EXPECT_TRUE(found);
}

// dlock 90 (group 80, spared) started CMD 100 (group 100) and its guard 91 (group 91).
std::vector<ProcessStat> command_tree() {
  return {
      proc(1, 0, 1),       proc(80, 1, 80),     proc(90, 80, 80),
      proc(91, 90, 91),    // dlock's guard: spared with dlock, not in the tree
      proc(100, 90, 100),  // CMD
      proc(101, 100, 100), // a child in CMD's group
      proc(102, 101, 102), // a job in a group of its own (set -m)
      proc(103, 102, 102), proc(104, 1, 102), // its child, and one reparented already
      proc(105, 100, 50),  // a child in a group led by an outsider
      proc(50, 1, 50),     proc(106, 105, 50), // the outsider; the child's own child
      proc(107, 100, 80),  // a child that joined dlock's group
      proc(200, 1, 200),   proc(201, 200, 100), // an outsider, its child in CMD's group
  };
}

TEST(ProcessTree, HoldsTheGroupItsDescendantsAndTheGroupsTheyLead) {
  ProcessTree tree(100, 0, {90}, {80});
  auto scan = tree.update(command_tree());
  EXPECT_TRUE(scan.runs);
  EXPECT_TRUE(scan.grew);
  EXPECT_EQ(tree.groups(), (std::set<pid_t>{100, 102}));
  EXPECT_EQ(tree.lone_pids(), (std::set<pid_t>{105, 106, 107}));
  EXPECT_FALSE(tree.update(command_tree()).grew) << "the same snapshot again has nothing new";
}

TEST(ProcessTree, KeepsWhatWasReparentedAndTellsAReusedPidApart) {
  ProcessTree tree(100, 0, {90}, {80});
  tree.update(command_tree());
  // CMD and 101 died: 102 and 105 went to init; 106's pid is now someone else's.
  std::vector<ProcessStat> later = {proc(1, 0, 1),       proc(90, 80, 80),
                                    proc(102, 1, 102),   proc(103, 102, 102),
                                    proc(105, 1, 50),    proc(106, 1, 50, 'S', 2000),
                                    proc(108, 105, 108)};
  auto scan = tree.update(later);
  EXPECT_TRUE(scan.runs);
  EXPECT_TRUE(scan.grew);  // 108
  EXPECT_EQ(tree.groups(), (std::set<pid_t>{102, 108})) << "100 is empty: gone for good";
  EXPECT_EQ(tree.lone_pids(), (std::set<pid_t>{105})) << "106 was reused, 107 is gone";
}

TEST(ProcessTree, ZombiesDoNotRunAndAnEmptyGroupIsGoneForGood) {
  ProcessTree tree(100, 0, {90}, {80});
  EXPECT_FALSE(
      tree.update({proc(90, 1, 80), proc(100, 90, 100, 'Z'), proc(102, 1, 100, 'X')}).runs);
  EXPECT_TRUE(tree.running().empty());
  EXPECT_TRUE(tree.update({proc(90, 1, 80), proc(100, 90, 100, 'Z'), proc(103, 1, 100)}).runs);
  EXPECT_EQ(tree.running(), std::vector<pid_t>{103});  // what the guard says it cannot stop
  EXPECT_FALSE(tree.update({proc(90, 1, 80)}).runs);
  // Group 100 had no process left: a group by that id now is someone else's.
  EXPECT_FALSE(tree.update({proc(90, 1, 80), proc(100, 1, 100, 'S', 5000)}).runs);
  EXPECT_TRUE(tree.groups().empty());
}

// CMD (100, started at tick 1000) moved itself and its child into dlock's group (80): both stay
// members, by pid. A process that took pid 100 later (another start time) never is one.
TEST(ProcessTree, TheCommandStaysAMemberAfterItLeavesItsGroup) {
  ProcessTree tree(100, 1000, {90}, {80});
  const auto scan = tree.update({proc(90, 1, 80), proc(100, 90, 80, 'S', 1000), proc(101, 100, 80)});
  EXPECT_TRUE(scan.runs);
  EXPECT_EQ(tree.lone_pids(), (std::set<pid_t>{100, 101}));
  ProcessTree later(100, 999, {90}, {80});
  EXPECT_FALSE(later.update({proc(90, 1, 80), proc(100, 1, 80, 'S', 1000)}).runs);
  EXPECT_TRUE(later.lone_pids().empty());
}

// CMD (100) still leads its group: the group's signal reaches it, and terminate() must not send
// it SIGTERM by pid as well. A shell that handled the first before the second came ran its trap
// twice (CliSignals.LostLockStopsTheCommandWithSigtermAndExits70 printed "stopped" twice in CI).
// Once it leaves for a group the tree does not signal, it is signalled by pid.
TEST(ProcessTree, TerminateSignalsTheCommandOnceWhileItLeadsItsGroup) {
  ProcessTree tree(100, 1000, {90}, {80});
  tree.update({proc(90, 1, 80), proc(100, 90, 100), proc(101, 100, 100), proc(105, 100, 50), proc(50, 1, 50)});
  EXPECT_EQ(tree.groups(), (std::set<pid_t>{100}));
  EXPECT_EQ(tree.terminated_by_pid(), (std::set<pid_t>{105}));
  tree.update({proc(90, 1, 80), proc(100, 90, 80), proc(101, 100, 100)});
  EXPECT_EQ(tree.terminated_by_pid(), (std::set<pid_t>{100})) << "CMD moved to dlock's group";
}

// A group the tree knows emptied and its id was taken by a new, unrelated group between two
// snapshots (pids wrap around: 32,768 of them here): nothing of the new group is a member.
// It was adopted and killed (review F4, forced with ns_last_pid: 5 of 5).
TEST(ProcessTree, AGroupIdTakenByAnUnrelatedGroupIsNotAdopted) {
  ProcessTree tree(100, 0, {90}, {80});
  tree.update(command_tree());  // knows job group 102 (processes 102, 103, 104)
  // 102's processes ended; an outsider's new session leader took pid and group id 102.
  std::vector<ProcessStat> later = {proc(1, 0, 1), proc(90, 80, 80), proc(100, 90, 100),
                                    proc(102, 1, 102, 'S', 9000), proc(120, 102, 102, 'S', 9001)};
  tree.update(later);
  EXPECT_EQ(tree.groups(), (std::set<pid_t>{100})) << "group 102 is someone else's now";
  EXPECT_TRUE(tree.lone_pids().empty());
}

// A nested dlock (110) in CMD's group: its CMD (111) and guard (112) lead groups of their own,
// both made inside the tree. The outer guard (91) never is.
TEST(ProcessTree, HoldsANestedDlocksCommandAndGuard) {
  ProcessTree tree(100, 0, {91, 90}, {91, 80});
  tree.update({proc(90, 1, 80), proc(91, 90, 91), proc(100, 90, 100), proc(110, 100, 100),
               proc(111, 110, 111), proc(112, 110, 112), proc(113, 111, 111)});
  EXPECT_EQ(tree.groups(), (std::set<pid_t>{100, 111, 112}));
  EXPECT_TRUE(tree.lone_pids().empty());
}

}  // namespace
}  // namespace dlock::cli
