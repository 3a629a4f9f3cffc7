#include "proc_net_tcp.h"

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

namespace dlock::conformance {
namespace {

struct Row {
  int state;
  long rx_queue;
};

std::optional<Row> find(int local_port, int remote_port) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    unsigned slot, local_ip, local, remote_ip, remote, state;
    unsigned long tx, rx;
    if (std::sscanf(line.c_str(), " %u: %x:%x %x:%x %x %lx:%lx", &slot, &local_ip, &local,
                    &remote_ip, &remote, &state, &tx, &rx) == 8 &&
        static_cast<int>(local) == local_port && static_cast<int>(remote) == remote_port) {
      return Row{static_cast<int>(state), static_cast<long>(rx)};
    }
  }
  return std::nullopt;
}

}  // namespace

int tcp_state(int local_port, int remote_port) {
  const auto row = find(local_port, remote_port);
  return row ? row->state : 0;
}

long rx_queue(int local_port, int remote_port) {
  const auto row = find(local_port, remote_port);
  return row ? row->rx_queue : -1;
}

}  // namespace dlock::conformance
