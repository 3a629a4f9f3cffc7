// DirWatcher: push wake-ups for waiters, from inotify on the lock directory.
//
// A holder gives a lock back by unlocking and closing its descriptor, and the kernel closes
// the descriptors of a process that dies; both raise IN_CLOSE_WRITE for the lock file
// (lock files are always opened read-write). A writer that passes the gate touches the
// file's times (IN_ATTRIB) so that those the gate kept out try again. A waiter registers
// the file name it waits for; one thread per watcher (one watcher per directory and
// process) reads the events and calls the matching waiters' wake functions. Waiters keep
// their descriptor open between attempts, so a failed attempt raises no event and waiters
// cannot wake each other in a loop. A close event is echoed once, 5 ms later, because
// at a holder's death the kernel raises it just before dropping the locks.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "unique_fd.h"

namespace dlock::file {

class DirWatcher : public std::enable_shared_from_this<DirWatcher> {
 public:
  class Registration;

  // The watcher of `dir` shared by every provider of this process on that directory
  // (inotify instances are scarce: 128 per user by default). Thread-safe.
  // A forked child gets a watcher of its own.
  static std::shared_ptr<DirWatcher> for_directory(const std::string& dir);

  // Starts watching `dir`. Prefer for_directory(). Never throws for inotify trouble: the
  // watcher then reports unhealthy and waiters fall back to polling (the thread retries the
  // watch every second).
  explicit DirWatcher(std::string dir);
  // Stops and joins the thread. REQUIRES: no registration of this watcher is still alive
  // (registrations hold a shared_ptr to the watcher, so this holds by construction).
  // In a child created by fork() (the thread does not exist there) it touches nothing the
  // parent shares and leaks the thread object instead of joining it.
  ~DirWatcher();
  DirWatcher(const DirWatcher&) = delete;
  DirWatcher& operator=(const DirWatcher&) = delete;

  // Calls `wake` (from the watcher thread, possibly spuriously) whenever `file_name` in the
  // directory is closed after writing or has its attributes changed, and on every event
  // overflow or loss of the watch.
  // Destroying the returned registration unregisters; after its destructor returns, `wake`
  // is never called again (the destructor waits for a call in progress, unless it runs on
  // the watcher thread itself).
  std::unique_ptr<Registration> watch(std::string file_name, std::function<void()> wake);

  // True while inotify watches the directory.
  bool healthy() const noexcept { return healthy_.load(); }

 private:
  struct Entry;

  void run();
  bool add_watch() noexcept;
  void handle(const char* buf, std::size_t len);
  void wake_matching(const std::string* name);  // nullptr: everyone
  void unregister(const std::string& file_name, const std::shared_ptr<Entry>& entry);

  using Clock = std::chrono::steady_clock;

  const std::string dir_;
  UniqueFd inotify_;
  UniqueFd stop_event_;
  std::atomic<bool> healthy_{false};
  std::mutex mu_;  // guards entries_
  std::unordered_multimap<std::string, std::shared_ptr<Entry>> entries_;
  // Only touched by the watcher thread: close events to echo, by deadline (FIFO = sorted).
  std::deque<std::pair<Clock::time_point, std::string>> echo_;
  const pid_t pid_;                      // the process whose thread this is
  std::unique_ptr<std::thread> thread_;  // a pointer, so a forked child can leak it
};

// One waiter's interest in one file name; unregisters when destroyed (never throws).
class DirWatcher::Registration {
 public:
  Registration(std::shared_ptr<DirWatcher> watcher, std::string file_name,
               std::shared_ptr<Entry> entry) noexcept;
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  std::shared_ptr<DirWatcher> watcher_;
  std::string file_name_;
  std::shared_ptr<Entry> entry_;
};

}  // namespace dlock::file
