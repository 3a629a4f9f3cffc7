#include "lease_cleaner.h"

#include <cppconn/exception.h>

#include <algorithm>

#include "errors.h"

namespace dlock::mysql {
namespace {

constexpr std::chrono::milliseconds kFirstRetry{50}, kMaxRetry{1000};

}  // namespace

LeaseCleaner::~LeaseCleaner() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

void LeaseCleaner::queue(LostAcquire lost) noexcept {
  try {
    const auto now = Clock::now();
    const auto lease = lost.lease;
    std::lock_guard lock(mu_);
    if (stopping_) return;
    entries_.push_back(Entry{std::move(lost), now, now + lease, kFirstRetry});
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  } catch (...) {
    return;  // no memory or no thread: the row runs out at its lease
  }
  cv_.notify_all();
}

bool LeaseCleaner::try_clear(const LostAcquire& lost) {
  auto conn = pool_.get(ConnClass::short_);  // throws Error when the server cannot be reached
  const Rows rows = conn->run(
      lease_clear_lost_batch(options_.table, lost.key_hex, lost.owner_hex, lost.sessions));
  pool_.put(std::move(conn));
  return rows.size() == 1 && !rows[0].empty() && rows[0][0] == std::optional<std::string>("0");
}

void LeaseCleaner::loop() noexcept {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (entries_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto sooner = [](const Entry& a, const Entry& b) { return a.next_try < b.next_try; };
    auto next = std::min_element(entries_.begin(), entries_.end(), sooner);
    if (next->next_try > Clock::now()) {
      cv_.wait_until(lock, next->next_try);
      continue;
    }
    Entry e = std::move(*next);
    entries_.erase(next);
    lock.unlock();
    bool done = false;
    bool in_doubt = true;  // the server did not answer, or still lists a session
    try {
      done = try_clear(e.lost);
    } catch (const sql::SQLException& ex) {
      in_doubt = connection_lost(ex);  // else the server refused the statement
    } catch (...) {  // no connection (Error)
    }
    lock.lock();
    if (done) continue;
    const auto now = Clock::now();
    if (in_doubt) e.give_up = std::max(e.give_up, now + e.lost.lease);
    if (now >= e.give_up) continue;
    e.next_try = now + e.backoff;
    e.backoff = std::min(e.backoff * 2, kMaxRetry);
    try {
      entries_.push_back(std::move(e));
    } catch (...) {
    }
  }
}

}  // namespace dlock::mysql
