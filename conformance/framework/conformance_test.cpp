#include "framework/conformance_test.h"

#include <unistd.h>

#include <atomic>
#include <sstream>
#include <thread>

namespace dlock::conformance {

void ConformanceTest::SetUp() {
  ctx_ = find_context(GetParam());
  ASSERT_NE(ctx_, nullptr) << "no conformance context for backend " << GetParam();
  checker_.set_check_fencing(ctx_->claims.fencing);
  try {
    env_ = ctx_->make_env();
  } catch (const std::exception& e) {
    GTEST_FAIL() << ctx_->backend << ": cannot prepare the backend: " << e.what();
  }
}

void ConformanceTest::TearDown() {
  for (const auto& v : checker_.violations()) ADD_FAILURE() << "safety checker: " << v;
  providers_.clear();
  if (env_) {
    try {
      env_->check_namespace_contained();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "namespace escape: " << e.what();
    }
  }
  env_.reset();
}

std::shared_ptr<ILockProvider> ConformanceTest::open(const UriOptions& options) {
  auto p = dlock::open(env_->uri(options));
  providers_.push_back(p);
  return p;
}

std::string ConformanceTest::name(std::string_view tag) const {
  static std::atomic<int> counter{0};
  std::ostringstream out;
  out << "conf-" << ::getpid() << "-" << counter++ << "-" << tag;
  return out.str();
}

std::unique_ptr<TrackedLease> ConformanceTest::track(ILockProvider& provider, std::string_view n,
                                                     Wait wait, const AcquireOptions& options,
                                                     LockMode mode) {
  const auto called = now_ns();
  auto lease = provider.try_acquire(n, mode, wait, options);
  if (!lease) return nullptr;
  std::string label = options.owner ? "owner " + *options.owner : thread_label();
  std::ostringstream via;
  via << label << " via provider " << static_cast<const void*>(&provider);
  return std::make_unique<TrackedLease>(checker_, std::move(*lease), via.str(), called);
}

std::string ConformanceTest::thread_label() {
  std::ostringstream out;
  out << "thread " << std::this_thread::get_id();
  return out.str();
}

std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace dlock::conformance
