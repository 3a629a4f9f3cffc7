#include "process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <deque>
#include <string>
#include <utility>

namespace dlock::cli {
namespace {

// Reads one number at `pos` of `text` (after spaces); false if there is none.
template <class T>
bool read_number(std::string_view text, std::size_t& pos, T& out) {
  while (pos < text.size() && text[pos] == ' ') ++pos;
  const char* begin = text.data() + pos;
  const auto [end, error] = std::from_chars(begin, text.data() + text.size(), out);
  if (error != std::errc{}) return false;
  pos += static_cast<std::size_t>(end - begin);
  return true;
}

// Skips one space-separated field at `pos`; false if there is none.
bool skip_field(std::string_view text, std::size_t& pos) {
  while (pos < text.size() && text[pos] == ' ') ++pos;
  const std::size_t start = pos;
  while (pos < text.size() && text[pos] != ' ') ++pos;
  return pos > start;
}

bool dead(char state) { return state == 'Z' || state == 'X'; }

}  // namespace

std::optional<ProcessStat> parse_stat(std::string_view text) {
  ProcessStat out;
  std::size_t pos = 0;
  if (!read_number(text, pos, out.pid) || text.substr(pos, 2) != " (") return std::nullopt;
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string_view::npos || close_paren < pos) return std::nullopt;
  pos = close_paren + 1;
  if (text.substr(pos, 1) != " " || pos + 1 >= text.size()) return std::nullopt;
  out.state = text[pos + 1];
  pos += 2;
  if (!read_number(text, pos, out.ppid) || !read_number(text, pos, out.pgrp)) return std::nullopt;
  // session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
  // priority nice num_threads itrealvalue, then starttime (proc(5), fields 6 to 22).
  for (int field = 6; field < 22; ++field) {
    if (!skip_field(text, pos)) return std::nullopt;
  }
  if (!read_number(text, pos, out.start)) return std::nullopt;
  return out;
}

std::optional<ProcessStat> read_process(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // ended meanwhile
  char buf[1024];                   // a line is a few hundred bytes; COMM is at most 64
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  return parse_stat(std::string_view(buf, static_cast<std::size_t>(n)));
}

std::optional<std::vector<ProcessStat>> read_processes() {
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return std::nullopt;
  std::vector<ProcessStat> out;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name(e->d_name);
    pid_t pid = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (name.empty() || error != std::errc{} || end != name.data() + name.size()) continue;
    if (std::optional<ProcessStat> stat = read_process(pid)) out.push_back(*stat);
  }
  ::closedir(dir);
  return out;
}

ProcessTree::ProcessTree(pid_t pgid, std::uint64_t leader_start, std::vector<pid_t> spared_pids,
                         std::vector<pid_t> spared_groups)
    : spared_pids_(spared_pids.begin(), spared_pids.end()),
      spared_groups_(spared_groups.begin(), spared_groups.end()),
      groups_{pgid} {
  if (leader_start != 0) lone_.emplace(pgid, leader_start);
}

bool ProcessTree::spared(pid_t pid) const { return pid <= 1 || spared_pids_.count(pid) != 0; }

ProcessTree::Scan ProcessTree::update(const std::vector<ProcessStat>& processes) {
  std::map<pid_t, const ProcessStat*> by_pid;
  std::map<pid_t, std::vector<pid_t>> children, by_group;
  for (const ProcessStat& p : processes) {
    by_pid[p.pid] = &p;
    children[p.ppid].push_back(p.pid);
    by_group[p.pgrp].push_back(p.pid);
  }
  std::map<pid_t, std::uint64_t> members;
  std::deque<pid_t> queue;
  auto add = [&](pid_t pid) {
    const auto it = by_pid.find(pid);
    if (spared(pid) || it == by_pid.end()) return;
    if (members.emplace(pid, it->second->start).second) queue.push_back(pid);
  };
  // A group seen before holds a process the last snapshot counted (same pid, same start), or
  // its id is someone else's now: it emptied and pids wrapped around in between.
  auto taken_over = [&](pid_t group, const std::vector<pid_t>& pids) {
    if (seen_groups_.count(group) == 0) return false;
    for (pid_t pid : pids) {
      const auto before = members_.find(pid);
      if (before != members_.end() && before->second == by_pid[pid]->start) return false;
    }
    return true;
  };
  for (auto it = groups_.begin(); it != groups_.end();) {
    const auto found = by_group.find(*it);
    if (found == by_group.end() || taken_over(*it, found->second)) {
      it = groups_.erase(it);  // gone for good: a group by that id later is someone else's
    } else {
      for (pid_t pid : found->second) add(pid);
      ++it;
    }
  }
  for (auto it = lone_.begin(); it != lone_.end();) {
    const auto found = by_pid.find(it->first);
    if (found == by_pid.end() || found->second->start != it->second) {
      it = lone_.erase(it);  // gone, its pid maybe someone else's now
    } else {
      add((it++)->first);
    }
  }
  while (!queue.empty()) {
    const ProcessStat& p = *by_pid[queue.front()];
    queue.pop_front();
    if (p.pgrp == p.pid && p.pgrp > 1 && spared_groups_.count(p.pgrp) == 0) {
      if (groups_.insert(p.pgrp).second) {  // a group made inside the tree: all of it
        for (pid_t pid : by_group[p.pgrp]) add(pid);
      }
    }
    if (groups_.count(p.pgrp) == 0) lone_.emplace(p.pid, p.start);  // an outsider's group
    for (pid_t child : children[p.pid]) add(child);
  }
  lone_groups_.clear();
  for (const auto& [pid, start] : lone_) {
    const auto found = by_pid.find(pid);
    if (found != by_pid.end()) lone_groups_[pid] = found->second->pgrp;
  }
  Scan scan;
  running_.clear();
  for (const auto& [pid, start] : members) {
    if (!dead(by_pid[pid]->state)) running_.push_back(pid);
    const auto before = members_.find(pid);
    if (before == members_.end() || before->second != start) scan.grew = true;
  }
  scan.runs = !running_.empty();
  members_ = std::move(members);
  seen_groups_ = groups_;
  return scan;
}

ProcessTree::Scan ProcessTree::refresh() {
  const std::optional<std::vector<ProcessStat>> processes = read_processes();
  if (processes) return update(*processes);
  lone_groups_.clear();  // no telling where they are now: terminate() signals them by pid too
  Scan scan;
  for (pid_t group : groups_) scan.runs = scan.runs || ::kill(-group, 0) == 0;
  for (const auto& [pid, start] : lone_) scan.runs = scan.runs || ::kill(pid, 0) == 0;
  return scan;
}

void ProcessTree::signal(int sig) const {
  std::set<pid_t> pids;
  for (const auto& [pid, start] : lone_) {
    if (!spared(pid)) pids.insert(pid);
  }
  send(sig, pids);
}

void ProcessTree::send(int sig, const std::set<pid_t>& pids) const {
  // Never kill(-1) (every process) or kill(0) (our own group): pids 0 and 1 are never members.
  for (pid_t group : groups_) {
    if (group > 1 && spared_groups_.count(group) == 0) ::kill(-group, sig);
  }
  for (pid_t pid : pids) {
    if (pid > 1) ::kill(pid, sig);
  }
}

void ProcessTree::terminate() {
  refresh();  // before any signal: a member that dies now takes its children out of sight
  // One that leaves its group between the snapshot and the signal misses this SIGTERM, not
  // kill()'s SIGSTOP and SIGKILL: those go by group and by pid (twice is harmless for them).
  const std::set<pid_t> by_pid = terminated_by_pid();
  send(SIGTERM, by_pid);
  send(SIGCONT, by_pid);
}

std::set<pid_t> ProcessTree::terminated_by_pid() const {
  std::set<pid_t> out;
  for (const auto& [pid, start] : lone_) {
    if (spared(pid)) continue;
    const auto group = lone_groups_.find(pid);
    const bool reached_by_group = group != lone_groups_.end() && groups_.count(group->second) != 0 &&
                                  spared_groups_.count(group->second) == 0;
    if (!reached_by_group) out.insert(pid);
  }
  return out;
}

void ProcessTree::kill() {
  refresh();
  freeze_and_kill();
}

void ProcessTree::terminate_and_kill() {
  refresh();
  send(SIGTERM, terminated_by_pid());
  freeze_and_kill();
}

void ProcessTree::freeze_and_kill() {
  for (int round = 0; round < 100; ++round) {
    signal(SIGSTOP);
    if (!refresh().grew) break;
  }
  signal(SIGKILL);
}

std::set<pid_t> ProcessTree::lone_pids() const {
  std::set<pid_t> out;
  for (const auto& [pid, start] : lone_) out.insert(pid);
  return out;
}

}  // namespace dlock::cli
