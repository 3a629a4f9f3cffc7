// The processes that belong to a command: its process group and everything that descends from
// it, in groups of their own too, so that a lost lock or a killed dlock stops them all.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

namespace dlock::cli {

// What a ProcessTree needs of one process, from /proc/PID/stat.
struct ProcessStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = '?';         // 'Z' (zombie) and 'X' (dead) run no code any more
  std::uint64_t start = 0;  // start time after boot, in clock ticks: tells a reused pid apart
};

// Parses the text of /proc/PID/stat: "PID (COMM) STATE PPID PGRP ... STARTTIME ...". COMM may
// hold anything, spaces and ')' included: the fields after it are read from the last ')'.
// Returns nullopt if the text is not such a line.
std::optional<ProcessStat> parse_stat(std::string_view text);

// One process's /proc/PID/stat; nullopt if it is gone (or /proc cannot be read).
std::optional<ProcessStat> read_process(pid_t pid);

// Every process of this host, from one pass over /proc/[0-9]*/stat (one that ends meanwhile
// is left out). nullopt if /proc cannot be listed.
std::optional<std::vector<ProcessStat>> read_processes();

// The process tree rooted at a process group (CMD's): every process of that group and,
// transitively by parent pid, their descendants. A descendant that leads a group of its own
// (a job of `set -m`, timeout(1), a nested dlock's CMD and its guard) brings that whole group
// in: the group was made inside the tree. A descendant in a group led by an outsider is
// counted and signalled by pid alone.
//
// A process whose parent dies is reparented (to init or a subreaper) and can no longer be
// found by parent pid, so the tree is cumulative: the groups and pids once found stay members
// until a snapshot finds them gone (a group with no process left never comes back: one by its
// id later is someone else's; a pid with another start time is another process), and a
// snapshot must be taken before anything is killed. What left the tree before its first
// snapshot is beyond its reach: a process that double-forks into a new session whose middle
// process has already exited.
//
// Never counts nor signals the processes of `spared_pids` (dlock, the guard), their
// descendants, or a group in `spared_groups` (dlock's own; a member in one is signalled by
// pid). Not thread-safe.
class ProcessTree {
 public:
  // The group's first leader (CMD, whose pid is the group's id, started at `leader_start`, in
  // clock ticks after boot as /proc gives it) is a member by its pid as well: it stays one
  // after it moves to another group, whenever that was. 0: not known.
  // REQUIRES: pgid > 1, not in spared_groups.
  ProcessTree(pid_t pgid, std::uint64_t leader_start, std::vector<pid_t> spared_pids,
              std::vector<pid_t> spared_groups);

  // What a snapshot found: `runs`, a member that is not a zombie; `grew`, a member that the
  // snapshot before did not have.
  struct Scan {
    bool runs = false;
    bool grew = false;
  };

  // Adds the members found in `processes` (a snapshot of the host's processes).
  Scan update(const std::vector<ProcessStat>& processes);
  // update() with a new snapshot of /proc. Without /proc it cannot tell: a known group or
  // pid that still exists runs, zombie or not.
  Scan refresh();

  // Sends `sig` to every group and every lone pid known (found by the last snapshot or an
  // earlier one, and not found gone since). Errors (already gone) are ignored.
  void signal(int sig) const;

  // A snapshot, then SIGTERM and SIGCONT (a stopped member handles SIGTERM once continued) to
  // every group and to terminated_by_pid().
  void terminate();

  // A snapshot, then SIGSTOP to every member and new snapshots until one finds none new (a
  // stopped process forks no more; at most 100 rounds), then SIGKILL to them all. Does not
  // wait for them to be gone.
  void kill();

  // terminate() and kill() at once, for a stop whose kill deadline has come: SIGTERM (no
  // SIGCONT: SIGSTOP follows) after the one snapshot that kill() takes first, so the first
  // signal comes a whole reading of /proc sooner (tens of ms on a loaded host under ASan).
  void terminate_and_kill();

  // The groups signalled as groups (kill(-pgid)), and the members known by pid alone.
  const std::set<pid_t>& groups() const { return groups_; }
  std::set<pid_t> lone_pids() const;
  // The lone pids that terminate() signals by pid: those the last snapshot did not find in a
  // group it signals (CMD while it leads its group, say). A catchable signal sent both ways can
  // be handled twice: a shell that handled the first before the second came ran its trap again.
  std::set<pid_t> terminated_by_pid() const;
  // The members the last snapshot found running (not zombies), by pid, in ascending order.
  const std::vector<pid_t>& running() const { return running_; }

 private:
  bool spared(pid_t pid) const;
  // `sig` to every group, then to each of `pids`.
  void send(int sig, const std::set<pid_t>& pids) const;
  // kill() after its first snapshot.
  void freeze_and_kill();

  std::set<pid_t> spared_pids_;
  std::set<pid_t> spared_groups_;
  std::set<pid_t> groups_;
  std::set<pid_t> seen_groups_;  // the groups the last snapshot had (checked for a take-over)
  std::map<pid_t, std::uint64_t> lone_;     // pid -> start time
  std::map<pid_t, pid_t> lone_groups_;      // pid -> its group in the last snapshot
  std::map<pid_t, std::uint64_t> members_;  // the last snapshot's members
  std::vector<pid_t> running_;              // those of them that are not zombies
};

}  // namespace dlock::cli
