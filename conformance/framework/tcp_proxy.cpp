#include "tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace dlock::conformance {
namespace {

void hard_close(int fd) {
  if (fd < 0) return;
  linger l{1, 0};  // RST instead of FIN
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

int connect_to(const std::string& host, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Writes all of `data`, giving up when the peer is gone.
bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const auto n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(std::string target_host, std::uint16_t target_port)
    : host_(std::move(target_host)), target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("proxy: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("proxy: cannot listen: ") + std::strerror(errno));
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::lock_guard lock(mu_);
  for (auto& t : pumps_) {
    if (t.joinable()) t.join();
  }
  ::close(listen_fd_);
}

void TcpProxy::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    ++accepted_;
    if (mode_ == Mode::refuse) {
      hard_close(client);
      continue;
    }
    int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int server = connect_to(host_, target_port_);
    if (server < 0) {
      hard_close(client);
      continue;
    }
    const int epoch = reset_epoch_;
    std::lock_guard lock(mu_);
    pumps_.emplace_back([this, client, server, epoch] { pump(client, server, epoch); });
  }
}

void TcpProxy::pump(int client, int server, int epoch) {
  std::vector<char> buf(64 * 1024);
  const int fds[2] = {client, server};
  bool open = true;
  while (open && !stop_) {
    if (reset_epoch_ != epoch || mode_ == Mode::refuse) break;
    if (mode_ == Mode::blackhole) {
      // Read nothing, forward nothing: the peers see a silent network.
      ::usleep(20 * 1000);
      continue;
    }
    pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(p, 2, 50) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const auto n = ::recv(fds[i], buf.data(), buf.size(), 0);
      if (n <= 0) {
        open = false;
        break;
      }
      if (i == 1 && mode_ == Mode::drop_replies) continue;  // read and dropped
      if (const auto d = delay_ms_.load(); d > 0) ::usleep(static_cast<useconds_t>(d * 1000));
      if (!write_all(fds[1 - i], buf.data(), static_cast<std::size_t>(n))) open = false;
    }
  }
  if (!open) {  // a peer closed: pass the close on politely
    ::close(client);
    ::close(server);
  } else {
    hard_close(client);
    hard_close(server);
  }
}

}  // namespace dlock::conformance
