#include "safety_checker.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>

namespace dlock::conformance {

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::size_t SafetyChecker::record(HoldRecord hold) {
  std::lock_guard lock(mu_);
  holds_.push_back(std::move(hold));
  return holds_.size() - 1;
}

void SafetyChecker::set_end(std::size_t index, std::int64_t end_ns) {
  std::lock_guard lock(mu_);
  holds_.at(index).end_ns = end_ns;
}

void SafetyChecker::set_lost(std::size_t index, std::int64_t lost_ns) {
  std::lock_guard lock(mu_);
  auto& h = holds_.at(index);
  if (!h.lost_ns || *h.lost_ns > lost_ns) h.lost_ns = lost_ns;
}

void SafetyChecker::sabotaged(const std::string& name, std::int64_t at_ns) {
  std::lock_guard lock(mu_);
  sabotage_.emplace_back(name, at_ns);
}

std::size_t SafetyChecker::size() const {
  std::lock_guard lock(mu_);
  return holds_.size();
}

namespace {

std::string describe(const HoldRecord& h, std::int64_t origin) {
  std::ostringstream out;
  auto ms = [&](std::int64_t t) { return static_cast<double>(t - origin) / 1e6; };
  out << h.owner << (h.mode == LockMode::shared ? " (shared)" : "") << " token " << h.token
      << " held " << ms(h.start_ns) << "..";
  if (h.end_ns == std::numeric_limits<std::int64_t>::max()) {
    out << "end";
  } else {
    out << ms(h.end_ns);
  }
  out << " ms";
  if (h.lost_ns) out << ", lost signal at " << ms(*h.lost_ns) << " ms";
  return out.str();
}

}  // namespace

std::vector<std::string> SafetyChecker::violations() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::vector<HoldRecord>> by_name;
  for (auto h : holds_) {
    for (const auto& [name, at] : sabotage_) {
      // Also a grant read after the sabotage whose acquire was called before it, if its
      // holder was told it lost the lock: the grant was on its way back when the lock was
      // destroyed (connections reset), and its holder could not know before then either.
      // (A grant that was never signalled lost came after the sabotage: not excused.)
      const bool in_flight = h.call_ns && *h.call_ns <= at && at < h.start_ns && h.lost_ns;
      if (name == h.name && (h.start_ns <= at || in_flight) && at < h.end_ns && (!h.lost_ns || *h.lost_ns > at)) {
        h.lost_ns = at;
      }
    }
    by_name[h.name].push_back(std::move(h));
  }
  std::vector<std::string> out;
  for (auto& [name, holds] : by_name) {
    std::sort(holds.begin(), holds.end(),
              [](const HoldRecord& a, const HoldRecord& b) { return a.start_ns < b.start_ns; });
    const auto origin = holds.front().start_ns;
    for (std::size_t j = 1; j < holds.size(); ++j) {
      const auto& b = holds[j];
      for (std::size_t i = 0; i < j; ++i) {
        const auto& a = holds[i];
        if (a.mode == LockMode::shared && b.mode == LockMode::shared) continue;
        if (a.owner == b.owner) continue;  // re-entry is not a second grant
        const bool overlap = b.start_ns < a.end_ns;
        const bool signalled = a.lost_ns && *a.lost_ns <= b.start_ns;
        if (overlap && !signalled && out.size() < 20) {
          out.push_back("double grant of \"" + name + "\": " + describe(a, origin) + " / " +
                        describe(b, origin));
        }
      }
    }
    if (!fencing_) continue;
    const HoldRecord* prev = nullptr;
    for (const auto& h : holds) {
      if (h.mode != LockMode::exclusive) continue;
      if (prev && h.token <= prev->token && out.size() < 20) {
        out.push_back("fencing token did not increase for \"" + name + "\": " +
                      describe(*prev, origin) + " then " + describe(h, origin));
      }
      prev = &h;
    }
  }
  return out;
}

TrackedLease::TrackedLease(SafetyChecker& checker, Lease lease, std::string owner_label,
                           std::optional<std::int64_t> call_ns)
    : checker_(checker),
      lease_(std::move(lease)),
      lost_at_(std::make_shared<std::optional<std::int64_t>>()),
      lost_mu_(std::make_shared<std::mutex>()) {
  HoldRecord h;
  h.name = lease_.name();
  h.owner = std::move(owner_label);
  h.mode = lease_.mode();
  h.token = lease_.fencing_token();
  h.start_ns = now_ns();
  h.call_ns = call_ns;
  index_ = checker_.record(std::move(h));
  auto* c = &checker_;
  const auto index = index_;
  auto lost_at = lost_at_;
  auto mu = lost_mu_;
  on_lost_ = std::make_unique<std::stop_callback<std::function<void()>>>(
      lease_.lost_token(), std::function<void()>([c, index, lost_at, mu] {
        const auto t = now_ns();
        {
          std::lock_guard lock(*mu);
          if (!*lost_at) *lost_at = t;
        }
        c->set_lost(index, t);
      }));
}

TrackedLease::~TrackedLease() {
  try {
    release();
  } catch (...) {
  }
  on_lost_.reset();
}

bool TrackedLease::release() {
  stop_using();
  return lease_.release();
}

void TrackedLease::stop_using() {
  if (ended_) return;
  ended_ = true;
  checker_.set_end(index_, now_ns());
}

std::optional<std::int64_t> TrackedLease::lost_ns() const {
  std::lock_guard lock(*lost_mu_);
  return *lost_at_;
}

}  // namespace dlock::conformance
