// The safety checker: records every hold of a case and finds double grants and fencing
// tokens that go backwards.
//
// Times are steady_clock nanoseconds (CLOCK_MONOTONIC, shared by every process of the host,
// so the taker's holds compare with ours). A hold's recorded interval lies inside its real
// one (start taken after acquire returned, end before release was called), so an overlap of
// recorded intervals is a real overlap.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/lease.h"

namespace dlock::conformance {

std::int64_t now_ns() noexcept;

struct HoldRecord {
  std::string name;
  std::string owner;
  LockMode mode = LockMode::exclusive;
  std::uint64_t token = 0;
  std::int64_t start_ns = 0;
  // When the acquire that returned this hold was called (unset: start_ns).
  std::optional<std::int64_t> call_ns;
  std::int64_t end_ns = std::numeric_limits<std::int64_t>::max();  // max: still held
  std::optional<std::int64_t> lost_ns;  // when the holder was told the lock was lost
};

// Thread-safe.
class SafetyChecker {
 public:
  // Whether successive exclusive holders' tokens must strictly increase.
  void set_check_fencing(bool on) { fencing_ = on; }

  // Records a hold and returns its index.
  std::size_t record(HoldRecord hold);
  void set_end(std::size_t index, std::int64_t end_ns);
  void set_lost(std::size_t index, std::int64_t lost_ns);
  // The lock `name` was destroyed from outside at `at_ns`: holds of it live then, or whose
  // acquire was on its way then, count as lost from that moment (their holders could not
  // have known earlier).
  void sabotaged(const std::string& name, std::int64_t at_ns);

  std::size_t size() const;
  // One line per violation: two overlapping holds of one name where the earlier one had not
  // been signalled lost (exclusive vs anything), or a token not above its predecessor's.
  std::vector<std::string> violations() const;

 private:
  mutable std::mutex mu_;
  std::vector<HoldRecord> holds_;
  std::vector<std::pair<std::string, std::int64_t>> sabotage_;
  bool fencing_ = false;
};

// A Lease whose hold is recorded in a SafetyChecker: start now, lost when its lost signal
// fires (recorded synchronously by a stop_callback), end when released through here.
class TrackedLease {
 public:
  // `call_ns`: when the acquire that returned `lease` was called (now_ns()).
  TrackedLease(SafetyChecker& checker, Lease lease, std::string owner_label,
               std::optional<std::int64_t> call_ns = std::nullopt);
  TrackedLease(TrackedLease&&) = delete;
  ~TrackedLease();  // releases (recording the end) if still held; never throws

  // Records the end, then releases. Returns Lease::release()'s answer.
  bool release();
  // Records the end (the holder stops using the lock) without releasing.
  void stop_using();
  Lease& lease() { return lease_; }
  std::uint64_t token() const noexcept { return lease_.fencing_token(); }
  // When the lost signal fired, if it did.
  std::optional<std::int64_t> lost_ns() const;

 private:
  SafetyChecker& checker_;
  Lease lease_;
  std::size_t index_;
  bool ended_ = false;
  std::shared_ptr<std::optional<std::int64_t>> lost_at_;
  std::shared_ptr<std::mutex> lost_mu_;
  std::unique_ptr<std::stop_callback<std::function<void()>>> on_lost_;
};

}  // namespace dlock::conformance
