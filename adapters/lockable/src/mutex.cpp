#include "dlock/adapters/mutex.h"

#include <atomic>

#include "dlock/error.h"

namespace dlock {
namespace {

void check_arguments(const std::shared_ptr<ILockProvider>& provider, const AcquireOptions& options) {
  if (!provider) throw Error(ErrorCode::invalid_argument, "dlock::Mutex needs a provider");
  if (options.owner) {
    throw Error(ErrorCode::invalid_argument,
                "dlock::Mutex takes no explicit owner: the locking thread is the owner");
  }
}

// The calling thread's identity for holder bookkeeping: drawn once per thread from a
// process-wide counter, so it is never reused within the process. std::thread::id is: glibc
// gives an exited thread's id to the next thread, which would then be taken for the holder
// of what the exited thread left locked. Never 0. (The core numbers its default owners the
// same way in core/src/owner.cpp, but does not export it.)
std::uint64_t this_thread_number() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

// Releases best effort: a hold that cannot be released ends by itself.
void release_quietly(Lease& lease) noexcept {
  try {
    lease.release();
  } catch (...) {
  }
}

}  // namespace

Mutex::Mutex(std::shared_ptr<ILockProvider> provider, std::string name, AcquireOptions options)
    : provider_(std::move(provider)), name_(std::move(name)), options_(std::move(options)) {
  check_arguments(provider_, options_);
}

Mutex::~Mutex() {
  std::optional<Held> current;
  std::vector<Held> superseded;
  {
    std::lock_guard guard(mu_);
    current.swap(current_);
    superseded.swap(superseded_);
  }
  for (auto& held : superseded) release_quietly(held.lease);
  if (current) release_quietly(current->lease);
}

void Mutex::lock() {
  if (!acquire(Wait::forever())) {
    throw Error(ErrorCode::cancelled, "waiting for '" + name_ + "' was cancelled");
  }
}

bool Mutex::try_lock() { return acquire(Wait::try_once()); }

bool Mutex::acquire(Wait wait) {
  const std::uint64_t self = this_thread_number();
  {
    std::lock_guard guard(mu_);
    // A lost hold not yet unlocked counts: this thread's lock() is still outstanding.
    bool holds = current_ && current_->locker == self;
    for (const Held& held : superseded_) holds = holds || held.locker == self;
    if (holds) throw Error(ErrorCode::would_deadlock, "dlock::Mutex '" + name_ + "' is already held by this thread");
  }
  // Waiting happens without mu_: another thread's unlock() must be able to proceed.
  std::optional<Lease> lease = provider_->try_acquire(name_, LockMode::exclusive, wait, options_);
  if (!lease) return false;
  std::lock_guard guard(mu_);
  // A hold still here belongs to another thread (this one was checked above) and the
  // provider just granted the name exclusively to this thread: that hold was lost. Its
  // lock() is still to be unlocked, and that unlock() must not release this new hold.
  if (current_) superseded_.push_back(std::move(*current_));
  current_.emplace(Held{self, std::move(*lease)});
  return true;
}

const Mutex::Held* Mutex::paired_with(std::uint64_t self) const {
  if (current_ && current_->locker == self) return &*current_;
  for (const Held& held : superseded_) {
    if (held.locker == self) return &held;
  }
  if (!superseded_.empty()) return &superseded_.front();
  return current_ ? &*current_ : nullptr;
}

void Mutex::unlock() noexcept {
  std::optional<Lease> lease;
  {
    std::lock_guard guard(mu_);
    const Held* held = paired_with(this_thread_number());
    if (!held) return;
    if (current_ && held == &*current_) {
      lease.emplace(std::move(current_->lease));
      current_.reset();
    } else {
      auto it = superseded_.begin() + (held - superseded_.data());
      lease.emplace(std::move(it->lease));
      superseded_.erase(it);
    }
  }
  // Released after the bookkeeping is updated, so the next holder never finds a stale hold
  // here. A superseded hold was lost: releasing it leaves the name's new holder untouched.
  release_quietly(*lease);
}

std::uint64_t Mutex::fencing_token() const {
  std::lock_guard guard(mu_);
  const Held* held = paired_with(this_thread_number());
  return held ? held->lease.fencing_token() : 0;
}

std::stop_token Mutex::lost_token() const {
  std::lock_guard guard(mu_);
  const Held* held = paired_with(this_thread_number());
  return held ? held->lease.lost_token() : std::stop_token{};
}

SharedMutex::SharedMutex(std::shared_ptr<ILockProvider> provider, std::string name, AcquireOptions options)
    : exclusive_(std::move(provider), std::move(name), std::move(options)) {}

SharedMutex::~SharedMutex() {
  std::map<std::uint64_t, Lease> shared;
  {
    std::lock_guard guard(mu_);
    shared.swap(shared_);
  }
  for (auto& [thread, lease] : shared) release_quietly(lease);
}

void SharedMutex::lock_shared() {
  if (!acquire_shared(Wait::forever())) {
    throw Error(ErrorCode::cancelled, "waiting for '" + name() + "' (shared) was cancelled");
  }
}

bool SharedMutex::try_lock_shared() { return acquire_shared(Wait::try_once()); }

bool SharedMutex::acquire_shared(Wait wait) {
  const std::uint64_t self = this_thread_number();
  {
    std::lock_guard guard(mu_);
    if (shared_.contains(self)) {
      throw Error(ErrorCode::would_deadlock,
                  "dlock::SharedMutex '" + name() + "' is already held shared by this thread");
    }
  }
  std::optional<Lease> lease =
      exclusive_.provider_->try_acquire(name(), LockMode::shared, wait, exclusive_.options_);
  if (!lease) return false;
  std::lock_guard guard(mu_);
  shared_.emplace(self, std::move(*lease));
  return true;
}

void SharedMutex::unlock_shared() noexcept {
  std::optional<Lease> lease;
  {
    std::lock_guard guard(mu_);
    auto it = shared_.find(this_thread_number());
    if (it == shared_.end()) return;
    lease = std::move(it->second);
    shared_.erase(it);
  }
  release_quietly(*lease);
}

std::uint64_t SharedMutex::fencing_token() const {
  {
    // This thread's own shared hold first: if it was lost and a writer was granted since,
    // the exclusive token is the writer's, newer than anything this reader may write with.
    std::lock_guard guard(mu_);
    auto it = shared_.find(this_thread_number());
    if (it != shared_.end()) return it->second.fencing_token();
  }
  return exclusive_.fencing_token();
}

}  // namespace dlock
