// Driver: runs one handle of the single-threaded ZooKeeper C client (c_client.h).
//
// A thread of its own waits on the handle's socket and lets the client read and process
// what arrives; callers send their requests themselves, under the same lock (the client
// writes a request to the socket at once). What the client reports through its callbacks
// (answers, watch and session events) does not run under that lock: a callback hands the
// driver a report, and the driver's thread runs the reports, in the client's order, after
// releasing the lock. So a report may take the backend's other locks, wake waiters and
// send requests; and a caller's own thread never runs one (a lost signal, say, never fires
// inside another lock call of the application).
#pragma once

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dlock::zookeeper {

class Driver {
 public:
  using Report = std::function<void()>;

  // A driver with no handle yet. Create it before the handle, so that whatever the
  // client's callbacks reach it through is set before start() lets any callback run.
  Driver();
  // Takes over `zh` (a handle fresh from zookeeper_init2) and starts its thread. Once.
  // Throws std::system_error if the thread cannot start (the handle is then closed).
  void start(zhandle_t* zh);
  // close(), if not done yet.
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Runs `request(zh)` (an asynchronous call of the client, returning its result code)
  // under the client's lock, and wakes the thread when it must look again: the client has
  // more to send than the socket took, moved to another socket, or reported something (a
  // failed send completes every pending request at once). After close(): ZINVALIDSTATE,
  // without running `request`.
  template <class Request>
  int call(Request&& request) {
    std::lock_guard lk(mu_);
    if (zh_ == nullptr) return ZINVALIDSTATE;
    const int rc = request(zh_);
    after_request_locked();
    return rc;
  }
  // Reads the handle under the client's lock: `read(zh)`, or `fallback` after close().
  template <class Read, class T>
  T read(Read&& read, T fallback) {
    std::lock_guard lk(mu_);
    return zh_ != nullptr ? read(zh_) : fallback;
  }

  // For the client's callbacks only (the client calls them with the lock held): `report`
  // runs on the driver's thread once the lock is released.
  void report(Report report);

  // Stops the thread and closes the handle (zookeeper_close: it tells the server the
  // session ends and waits up to ~4.5 s for an unreachable one; it completes every request
  // still pending with ZCLOSING). Then runs what that reported, on the calling thread.
  // Idempotent.
  void close() noexcept;

 private:
  void loop();
  void after_request_locked();  // mu_ held
  static void run(std::vector<Report>& reports) noexcept;

  std::mutex mu_;                // the client's lock: every use of zh_
  zhandle_t* zh_ = nullptr;      // guarded by mu_; null before start() and once closed
  std::vector<Report> reports_;  // guarded by mu_
  int polled_fd_ = -1;           // guarded by mu_: the socket the thread waits on
  int marked_fd_ = -1;           // guarded by mu_: the socket last marked close-on-exec
  const int wake_fd_;            // eventfd: a write wakes the thread
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dlock::zookeeper
