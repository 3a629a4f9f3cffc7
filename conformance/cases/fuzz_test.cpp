// The lost-update fuzzer (after ShedLock's FuzzTester): threads and processes increment an
// unprotected counter under the lock; any lapse of exclusion loses an update.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "framework/conformance_test.h"
#include "framework/taker_client.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(LostUpdate);

namespace {

long read_file(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  in >> v;
  return v;
}

void write_file(const std::string& path, long v) { std::ofstream(path, std::ios::trunc) << v << '\n'; }

}  // namespace

TEST_P(LostUpdate, ThreadsOnSeveralProviders) {
  constexpr int kThreads = 6, kRounds = 60;
  std::vector<std::shared_ptr<ILockProvider>> providers{open(), open(), open()};
  const std::vector<std::string> names{name("a"), name("b")};
  long counters[2] = {0, 0};  // deliberately unprotected: the lock is the only protection
  std::atomic<int> failures{0};
  // With no fault injected and holds far shorter than the lease, no hold may be lost.
  std::atomic<int> spurious_losses{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto& p = *providers[static_cast<std::size_t>(t) % providers.size()];
        const int rounds = t == 0 ? kRounds / 6 : kRounds;  // one short thread, as ShedLock does
        for (int i = 0; i < rounds; ++i) {
          const std::size_t k = static_cast<std::size_t>(i + t) % 2;
          try {
            auto h = track(p, names[k], Wait::for_duration(std::chrono::seconds(20)));
            if (!h) {
              ++failures;
              continue;
            }
            const long v = counters[k];
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            counters[k] = v + 1;
            if (!h->release()) ++spurious_losses;
          } catch (const std::exception&) {
            ++failures;
          }
        }
      });
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(spurious_losses, 0) << "holds were lost (release found them not held) with no fault injected";
  EXPECT_EQ(counters[0] + counters[1], kRounds * (kThreads - 1) + kRounds / 6) << "lost updates";
}

TEST_P(LostUpdate, ThreadsAndProcesses) {
  DLOCK_REQUIRE_CLAIM(cross_process);
  constexpr int kThreads = 2, kProcesses = 2, kRounds = 50;
  const std::string counter =
      (std::filesystem::temp_directory_path() / ("dlock-conf-counter-" + std::to_string(::getpid()))).string();
  write_file(counter, 0);
  const auto n = name();
  auto p = open();
  std::atomic<int> failures{0};
  // With no fault injected and holds far shorter than the lease, no hold may be lost.
  std::atomic<int> spurious_losses{0};
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < kProcesses; ++i) {
      workers.emplace_back([&, i] {
        try {
          Taker taker(env().uri());
          taker.increment(n, counter, kRounds, checker(), "taker " + std::to_string(i),
                          std::chrono::seconds(60));
        } catch (const std::exception& e) {
          ADD_FAILURE() << "taker " << i << ": " << e.what();
        }
      });
    }
    for (int t = 0; t < kThreads; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < kRounds; ++i) {
          try {
            auto h = track(*p, n, Wait::for_duration(std::chrono::seconds(30)));
            if (!h) {
              ++failures;
              continue;
            }
            const long v = read_file(counter);
            std::this_thread::yield();
            write_file(counter, v + 1);
            if (!h->release()) ++spurious_losses;
          } catch (const std::exception&) {
            ++failures;
          }
        }
      });
    }
  }
  const long total = read_file(counter);
  std::filesystem::remove(counter);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(spurious_losses, 0) << "holds were lost (release found them not held) with no fault injected";
  EXPECT_EQ(total, (kThreads + kProcesses) * kRounds) << "lost updates";
}

}  // namespace dlock::conformance
