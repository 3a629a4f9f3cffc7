// The contender of section (b) keeps measuring through what the API documents as
// recoverable: a release answered Error(unavailable) keeps the hold and may be sent again.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "scripted_backend.h"  // core/tests
#include "contender.h"
#include "dlock/spi/backend_provider.h"

namespace dlock_bench {
namespace {

using namespace std::chrono_literals;
using dlock::testing::ScriptedBackend;

struct Outcome {
  WorkerState state;
  std::string error;
  std::uint64_t acquisitions, release_retries;
  std::chrono::milliseconds took;
};

// One contender thread on a scripted backend, for `window` after go.
Outcome contend_for(const std::shared_ptr<ScriptedBackend>& backend, std::chrono::milliseconds window) {
  auto provider = dlock::spi::make_provider(backend, "scripted://");
  SharedRegion region = SharedRegion::create(1, 1000);
  SharedHeader& h = region.header();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread worker([&] { contend(*provider, region, 0, "contended", std::stop_token{}, false); });
  const auto starting = static_cast<std::uint32_t>(WorkerState::starting);
  while (h.slots[0].state.load() == starting) std::this_thread::sleep_for(1ms);
  h.go.store(1);
  std::this_thread::sleep_for(window);
  h.stop.store(1);
  worker.join();
  region.unlink();
  const WorkerSlot& s = h.slots[0];
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  return Outcome{static_cast<WorkerState>(s.state.load()), s.error, s.acquisitions.load(), s.release_retries.load(),
                 took};
}

TEST(Contender, AReleaseAnsweredUnavailableIsSentAgainAndCounted) {
  auto backend = std::make_shared<ScriptedBackend>(10s, dlock::Liveness::lease);
  backend->failing_releases = 2;
  Outcome run = contend_for(backend, 200ms);
  EXPECT_EQ(run.state, WorkerState::done) << run.error;
  EXPECT_EQ(run.release_retries, 2u);
  EXPECT_GT(run.acquisitions, 2u);  // it went on contending after the retried release
  EXPECT_FALSE(backend->held("contended"));  // and gave the last hold back
}

TEST(Contender, AReleaseThatNeverGetsThroughFailsTheWorkerInsteadOfHanging) {
  auto backend = std::make_shared<ScriptedBackend>(10s, dlock::Liveness::lease);
  backend->failing_releases = 1'000'000;
  Outcome run = contend_for(backend, 100ms);
  EXPECT_EQ(run.state, WorkerState::failed);
  EXPECT_NE(run.error.find("no answer to the release"), std::string::npos) << run.error;
  EXPECT_GT(run.release_retries, 0u);
  EXPECT_LT(run.took, 15s);  // bounded: the run's finish grace is 10 s
}

}  // namespace
}  // namespace dlock_bench
