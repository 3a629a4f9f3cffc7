#include "driver.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "c_client.h"
#include "dlock/error.h"
#include "dlock/support/close_on_exec.h"

namespace dlock::zookeeper {
namespace {

int make_wake_fd() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorCode::unavailable, std::string("zookeeper: cannot create an eventfd: ") + std::strerror(errno));
  }
  return fd;
}

void wake(int fd) noexcept {
  const std::uint64_t one = 1;
  while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

}  // namespace

Driver::Driver() : wake_fd_(make_wake_fd()) {}

void Driver::start(zhandle_t* zh) {
  {
    std::lock_guard lk(mu_);
    zh_ = zh;
  }
  thread_ = std::thread([this] { loop(); });  // on failure, ~Driver closes the handle
}

Driver::~Driver() {
  close();
  ::close(wake_fd_);
}

void Driver::report(Report report) { reports_.push_back(std::move(report)); }

void Driver::run(std::vector<Report>& reports) noexcept {
  for (auto& r : reports) {
    try {
      r();
    } catch (...) {  // a report never throws on purpose; never let one end the thread
    }
  }
  reports.clear();
}

void Driver::after_request_locked() {
  int fd = -1;
  int interest = 0;
  timeval tv{};
  c_client().interest(zh_, &fd, &interest, &tv);
  if (fd >= 0 && fd != marked_fd_) {
    support::set_close_on_exec(fd);  // the client opens its sockets without O_CLOEXEC
    marked_fd_ = fd;
  }
  if (fd != polled_fd_ || (interest & c_client().write_interest) != 0 || !reports_.empty()) wake(wake_fd_);
}

void Driver::loop() {
  const CClient& zk = c_client();
  std::vector<Report> reports;
  std::unique_lock lk(mu_);
  while (!stop_.load()) {
    int fd = -1;
    int interest = 0;
    timeval tv{};
    // A dead session (expired, auth failed) has nothing left to do: wait for close().
    const bool dead = zk.interest(zh_, &fd, &interest, &tv) == ZINVALIDSTATE;
    if (fd >= 0 && fd != marked_fd_) {
      support::set_close_on_exec(fd);
      marked_fd_ = fd;
    }
    polled_fd_ = fd;
    reports.swap(reports_);
    lk.unlock();
    run(reports);

    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd, 0, 0}};
    if ((interest & zk.read_interest) != 0) fds[1].events |= POLLIN;
    if ((interest & zk.write_interest) != 0) fds[1].events |= POLLOUT;
    const long long ms = static_cast<long long>(tv.tv_sec) * 1000 + tv.tv_usec / 1000;
    ::poll(fds, fd >= 0 ? 2 : 1, dead ? -1 : static_cast<int>(std::clamp(ms, 0LL, 1000LL)));
    if ((fds[0].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      (void)!::read(wake_fd_, &count, sizeof count);
    }
    int events = 0;
    if (fd >= 0) {
      if ((fds[1].revents & POLLIN) != 0) events |= zk.read_interest;
      if ((fds[1].revents & (POLLOUT | POLLHUP | POLLERR)) != 0) events |= zk.write_interest;
    }

    lk.lock();
    if (stop_.load()) break;
    zk.process(zh_, events);  // callbacks run here and report
  }
}

void Driver::close() noexcept {
  if (!stop_.exchange(true)) {
    wake(wake_fd_);
    if (thread_.joinable()) thread_.join();
  }
  std::vector<Report> reports;
  {
    std::lock_guard lk(mu_);
    if (zh_ == nullptr) return;
    c_client().close(zh_);  // completes what is pending (ZCLOSING): reports
    zh_ = nullptr;
    reports.swap(reports_);
  }
  run(reports);
}

}  // namespace dlock::zookeeper
