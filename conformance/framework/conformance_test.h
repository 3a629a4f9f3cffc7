// The fixture every case derives from, parameterized by backend name.
//
// Each case gets a fresh BackendEnv (its own namespace), opens providers through open(),
// and records holds in checker(); TearDown fails the case if the checker finds a double
// grant or a fencing token going backwards.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "dlock/dlock.h"
#include "framework/backend_context.h"
#include "framework/result_table.h"
#include "framework/safety_checker.h"

namespace dlock::conformance {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  const BackendContext& ctx() const { return *ctx_; }
  const Claims& claims() const { return ctx_->claims; }
  BackendEnv& env() { return *env_; }
  SafetyChecker& checker() { return checker_; }
  milliseconds tol() const { return ctx_->tolerance; }
  milliseconds lease() const { return ctx_->short_lease; }

  // Opens a provider on this case's namespace; it lives until the end of the case.
  std::shared_ptr<ILockProvider> open(const UriOptions& options = {});
  // A name unique to this case and backend run.
  std::string name(std::string_view tag = "lock") const;
  // Acquires with try_acquire and wraps the lease in a TrackedLease (nullptr when busy).
  std::unique_ptr<TrackedLease> track(ILockProvider& provider, std::string_view name, Wait wait,
                                      const AcquireOptions& options = {},
                                      LockMode mode = LockMode::exclusive);
  // A label for holds: "thread <id>" by default.
  static std::string thread_label();

 private:
  const BackendContext* ctx_ = nullptr;
  std::unique_ptr<BackendEnv> env_;
  SafetyChecker checker_;
  std::vector<std::shared_ptr<ILockProvider>> providers_;
};

// Elapsed milliseconds since `start`.
inline long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// Polls `condition` every 10 ms until it holds or `limit` passes; returns whether it held.
template <class F>
bool eventually(F condition, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    if (condition()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

// A printable backend name for the parameterized test's suffix.
std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info);

}  // namespace dlock::conformance

// Skips the case as "not claimed" unless the backend claims `flag` (a Claims member).
#define DLOCK_REQUIRE_CLAIM(flag)                                                        \
  do {                                                                                   \
    if (!claims().flag) GTEST_SKIP() << ::dlock::conformance::kNotClaimed << #flag;      \
  } while (0)

// Declares a suite of cases `Suite` run once per selected backend.
#define DLOCK_CONFORMANCE_SUITE(Suite)                                                    \
  class Suite : public ::dlock::conformance::ConformanceTest {};                          \
  INSTANTIATE_TEST_SUITE_P(Conformance, Suite,                                            \
                           ::testing::ValuesIn(::dlock::conformance::selected_backends()), \
                           ::dlock::conformance::backend_param_name)

// Expects `expr` to throw dlock::Error with `code`; evaluates to nothing.
#define DLOCK_EXPECT_ERROR(expr, code_)                                                       \
  do {                                                                                        \
    try {                                                                                     \
      (void)(expr);                                                                           \
      ADD_FAILURE() << #expr " did not throw " << ::dlock::to_string(code_);                  \
    } catch (const ::dlock::Error& dlock_e_) {                                                \
      EXPECT_EQ(dlock_e_.code(), code_) << #expr " threw " << dlock_e_.what();                \
    } catch (const std::exception& dlock_e_) {                                                \
      ADD_FAILURE() << #expr " threw a non-dlock exception: " << dlock_e_.what();             \
    }                                                                                         \
  } while (0)
