// A TCP fault proxy between a client and its server: forwards bytes, and on command stalls
// (blackholes), delays or resets the connections. Listens on 127.0.0.1, an ephemeral port.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::conformance {

// Thread-safe. The destructor stops every thread and closes every socket.
class TcpProxy {
 public:
  enum class Mode {
    pass,       // forward everything
    blackhole,  // accept and keep connections, forward nothing (a stalled network)
    refuse,     // reset every connection, new ones at once (a dead route)
    drop_replies,  // forward requests to the server, swallow its answers (a reply lost
                   // after the server acted on the request: an ambiguous outcome)
  };

  // Throws std::runtime_error if it cannot listen.
  TcpProxy(std::string target_host, std::uint16_t target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::uint16_t port() const noexcept { return port_; }

  void set_mode(Mode mode) noexcept { mode_ = mode; }
  // Holds every forwarded chunk back this long (0: no delay).
  void set_delay(std::chrono::milliseconds delay) noexcept { delay_ms_ = delay.count(); }
  // Resets (RST) every open connection now; later connections are served per the mode.
  void reset_all() noexcept { ++reset_epoch_; }
  // Connections accepted so far.
  int accepted() const noexcept { return accepted_; }

 private:
  void accept_loop();
  void pump(int client, int server, int epoch);

  std::string host_;
  std::uint16_t target_port_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<Mode> mode_{Mode::pass};
  std::atomic<long long> delay_ms_{0};
  std::atomic<int> reset_epoch_{0};
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::list<std::thread> pumps_;
  std::thread acceptor_;
};

}  // namespace dlock::conformance
