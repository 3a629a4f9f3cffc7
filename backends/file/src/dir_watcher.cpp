#include "dir_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <exception>

namespace dlock::file {
namespace {

// How long after a close event its waiters are woken a second time (see handle()).
constexpr std::chrono::milliseconds kEcho{5};

constexpr std::uint32_t kMask =
    IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

}  // namespace

struct DirWatcher::Entry {
  std::function<void()> wake;
  std::atomic<bool> alive{true};
  std::mutex calling;  // held while `wake` runs, so unregistering can wait for it
};

DirWatcher::Registration::Registration(std::shared_ptr<DirWatcher> watcher,
                                       std::string file_name,
                                       std::shared_ptr<Entry> entry) noexcept
    : watcher_(std::move(watcher)), file_name_(std::move(file_name)), entry_(std::move(entry)) {}

DirWatcher::Registration::~Registration() { watcher_->unregister(file_name_, entry_); }

std::shared_ptr<DirWatcher> DirWatcher::for_directory(const std::string& dir) {
  // Leaked on purpose: no destruction-order trouble at exit; it only holds weak pointers.
  static auto* mu = new std::mutex;
  static auto* watchers = new std::unordered_map<std::string, std::weak_ptr<DirWatcher>>;
  std::lock_guard lock(*mu);
  for (auto it = watchers->begin(); it != watchers->end();) {  // forget dead ones
    it = it->second.expired() ? watchers->erase(it) : std::next(it);
  }
  auto& slot = (*watchers)[dir];
  auto watcher = slot.lock();
  if (!watcher || watcher->pid_ != ::getpid()) {
    watcher = std::make_shared<DirWatcher>(dir);
    slot = watcher;
  }
  return watcher;
}

DirWatcher::DirWatcher(std::string dir)
    : dir_(std::move(dir)),
      inotify_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)),
      stop_event_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      pid_(::getpid()) {
  if (!inotify_.valid() || !stop_event_.valid()) return;  // unhealthy: waiters poll
  healthy_ = add_watch();
  try {
    thread_ = std::make_unique<std::thread>([this] { run(); });
  } catch (const std::exception&) {  // no thread to be had (EAGAIN): waiters poll
    healthy_ = false;
  }
}

DirWatcher::~DirWatcher() {
  if (!thread_) return;
  if (::getpid() != pid_) {
    // A forked child: the eventfd would stop the parent's thread, and joining a thread that
    // does not exist here would hang. Leak the thread object; close only our copies of fds.
    static_cast<void>(thread_.release());
    return;
  }
  std::uint64_t one = 1;
  while (::write(stop_event_.get(), &one, sizeof one) < 0 && errno == EINTR) {
  }
  thread_->join();
}

bool DirWatcher::add_watch() noexcept {
  // Re-adding a watch for the same inode just updates it, so retrying is harmless.
  return ::inotify_add_watch(inotify_.get(), dir_.c_str(), kMask) >= 0;
}

std::unique_ptr<DirWatcher::Registration> DirWatcher::watch(std::string file_name,
                                                            std::function<void()> wake) {
  auto entry = std::make_shared<Entry>();
  entry->wake = std::move(wake);
  {
    std::lock_guard lock(mu_);
    entries_.emplace(file_name, entry);
  }
  return std::make_unique<Registration>(shared_from_this(), std::move(file_name),
                                        std::move(entry));
}

void DirWatcher::unregister(const std::string& file_name, const std::shared_ptr<Entry>& entry) {
  {
    std::lock_guard lock(mu_);
    auto [first, last] = entries_.equal_range(file_name);
    for (auto it = first; it != last; ++it) {
      if (it->second == entry) {
        entries_.erase(it);
        break;
      }
    }
  }
  entry->alive = false;
  // Wait for a wake() in progress; not on our own thread, where that call is the caller.
  if (!thread_ || std::this_thread::get_id() != thread_->get_id()) {
    std::lock_guard wait(entry->calling);
  }
}

void DirWatcher::run() {
  alignas(struct inotify_event) char buf[16 * 1024];
  for (;;) {
    struct pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {stop_event_.get(), POLLIN, 0}};
    int timeout_ms = healthy_ ? -1 : 1000;
    if (!echo_.empty()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(echo_.front().first - Clock::now());
      timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, kEcho.count()));
    }
    int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) return;  // cannot happen with valid fds; waiters still poll
    if (fds[1].revents != 0) return;
    try {
      if (!healthy_ && add_watch()) {
        healthy_ = true;
        wake_matching(nullptr);  // events may have been missed while unwatched
      }
      for (auto now = Clock::now(); !echo_.empty() && echo_.front().first <= now;) {
        std::string name = std::move(echo_.front().second);
        echo_.pop_front();
        wake_matching(&name);
      }
      if (n <= 0 || fds[0].revents == 0) continue;
      for (;;) {
        ssize_t len = ::read(inotify_.get(), buf, sizeof buf);
        if (len <= 0) break;  // EAGAIN: drained
        handle(buf, static_cast<std::size_t>(len));
      }
    } catch (...) {
      // Out of memory: these wake-ups are lost; waiters still poll. Never end the process.
    }
  }
}

void DirWatcher::handle(const char* buf, std::size_t len) {
  for (std::size_t off = 0; off < len;) {
    const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + off);
    off += sizeof(struct inotify_event) + ev->len;
    if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
      // Lost events or lost the watch itself: wake everyone; retry the watch if it is gone.
      if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) healthy_ = false;
      wake_matching(nullptr);
    } else if (ev->len > 0) {
      std::string name(ev->name);  // NUL-padded by the kernel
      wake_matching(&name);
      // When a holder dies, the kernel raises the close event just before it drops the
      // file's locks: a quick waiter can find the lock still held. Wake the name once more.
      if (ev->mask & IN_CLOSE_WRITE) echo_.emplace_back(Clock::now() + kEcho, std::move(name));
    }
  }
}

void DirWatcher::wake_matching(const std::string* name) {
  std::vector<std::shared_ptr<Entry>> hit;
  {
    std::lock_guard lock(mu_);
    if (name == nullptr) {
      for (auto& [key, entry] : entries_) hit.push_back(entry);
    } else {
      auto [first, last] = entries_.equal_range(*name);
      for (auto it = first; it != last; ++it) hit.push_back(it->second);
    }
  }
  for (auto& entry : hit) {
    std::lock_guard calling(entry->calling);
    if (!entry->alive) continue;
    try {
      entry->wake();
    } catch (...) {
      // A wake function that throws must not end the watcher thread.
    }
  }
}

}  // namespace dlock::file
