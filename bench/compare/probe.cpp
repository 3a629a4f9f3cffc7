// dlock-compare-probe: the small lock client bench/compare/compare.py drives to measure what
// dlock-bench does not (server IO per acquire, what a server crash does, dead-holder time,
// FIFO order, requests while waiting, renewal past several leases).
//
// The URI comes in DLOCK_URI (never argv: `ps` would show a password). Every line printed is
// "<event> <CLOCK_MONOTONIC ns> [details]", flushed at once, so the driver can time events
// of several probes on one clock.
//
//   dlock-compare-probe loop NAME N          one acquire (waits up to 60 s: settles), then N x
//                                            (try_lock + release); prints "done <ns> <seconds>"
//   dlock-compare-probe hold NAME MS [fair]  acquire (forever), hold MS ms watching the lost
//                                            signal, release; prints acquired/lost/released
//   dlock-compare-probe wait NAME MS HOLD_MS [fair]
//                                            wait at most MS for NAME (0 = try once), hold
//                                            HOLD_MS, release; prints start, acquired or timeout
// Exit: 0 done, 1 a dlock error (printed as "error <ns> <message>"), 2 bad usage.
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "dlock/dlock.h"

namespace {

std::int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void say(const std::string& event, const std::string& details = "") {
  std::cout << event << ' ' << mono_ns() << (details.empty() ? "" : " " + details) << std::endl;
}

int usage() {
  std::cerr << "usage: dlock-compare-probe loop NAME N | hold NAME MS [fair] | wait NAME MS HOLD_MS [fair]\n"
               "       (the URI in DLOCK_URI)\n";
  return 2;
}

// Holds `lease` for `ms`, reporting a lost signal as soon as it fires; then releases.
void hold_for(dlock::Lease& lease, long ms) {
  auto lost = lease.lost_token();
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  bool told = false;
  while (std::chrono::steady_clock::now() < until) {
    if (!told && lost.stop_requested()) {
      say("lost");
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bool ok = false;
  try {
    ok = lease.release();
  } catch (const dlock::Error& e) {
    say("release-error", e.what());
    return;
  }
  say("released", ok ? "ok" : "not-held");
}

}  // namespace

int main(int argc, char** argv) {
  const char* uri = std::getenv("DLOCK_URI");
  if (uri == nullptr || argc < 3) return usage();
  const std::string cmd = argv[1], name = argv[2];
  try {
    auto locks = dlock::open(uri);
    if (cmd == "loop" && argc == 4) {
      const long n = std::atol(argv[3]);
      // Settle first: a backend may grant nothing for a while after it found data loss
      // (redis's restart_grace on a fresh or restarted server).
      for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);;) {
        if (auto first = locks->try_lock(name, dlock::Wait::for_duration(std::chrono::seconds(1)))) {
          first->release();
          break;
        }
        if (std::chrono::steady_clock::now() > until) break;
      }
      auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < n; ++i) {
        auto lease = locks->try_lock(name);
        if (!lease) {
          say("busy");
          return 1;
        }
        lease->release();
      }
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
      say("done", std::to_string(took.count()));
      return 0;
    }
    const bool fair = (cmd == "hold" && argc == 5) || (cmd == "wait" && argc == 6);
    dlock::AcquireOptions options;
    options.fair = fair && locks->capabilities().fair;
    if (cmd == "hold" && (argc == 4 || fair)) {
      auto lease = locks->lock(name, options);
      say("acquired", std::to_string(lease.fencing_token()));
      hold_for(lease, std::atol(argv[3]));
      return 0;
    }
    if (cmd == "wait" && (argc == 5 || fair)) {
      const long wait_ms = std::atol(argv[3]);
      say("start");
      auto wait = wait_ms == 0 ? dlock::Wait::try_once() : dlock::Wait::for_duration(std::chrono::milliseconds(wait_ms));
      auto lease = locks->try_lock(name, wait, options);
      if (!lease) {
        say("timeout");
        return 0;
      }
      say("acquired", std::to_string(lease->fencing_token()));
      hold_for(*lease, std::atol(argv[4]));
      return 0;
    }
    return usage();
  } catch (const std::exception& e) {
    say("error", e.what());
    return 1;
  }
}
