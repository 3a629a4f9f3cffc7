// A mutex and its scoped lock, annotated for clang's -Wthread-safety (the clang build
// checks them; elsewhere the annotations are empty). The core's shared state says which
// mutex guards it with DLOCK_GUARDED_BY; functions that expect it held say DLOCK_REQUIRES.
#pragma once

#include <mutex>

#if defined(__clang__)
#define DLOCK_TSA(x) __attribute__((x))
#else
#define DLOCK_TSA(x)
#endif
#define DLOCK_CAPABILITY(x) DLOCK_TSA(capability(x))
#define DLOCK_SCOPED_CAPABILITY DLOCK_TSA(scoped_lockable)
#define DLOCK_GUARDED_BY(x) DLOCK_TSA(guarded_by(x))
#define DLOCK_REQUIRES(...) DLOCK_TSA(requires_capability(__VA_ARGS__))
#define DLOCK_ACQUIRE(...) DLOCK_TSA(acquire_capability(__VA_ARGS__))
#define DLOCK_RELEASE(...) DLOCK_TSA(release_capability(__VA_ARGS__))
#define DLOCK_EXCLUDES(...) DLOCK_TSA(locks_excluded(__VA_ARGS__))

namespace dlock::detail {

class DLOCK_CAPABILITY("mutex") Mutex {
 public:
  void lock() DLOCK_ACQUIRE() { m_.lock(); }
  void unlock() DLOCK_RELEASE() { m_.unlock(); }
  std::mutex& native() noexcept { return m_; }

 private:
  std::mutex m_;
};

// Holds a Mutex from construction until destruction or unlock(); native() is the
// std::unique_lock a std::condition_variable waits on (the wait releases and re-takes it,
// so the mutex is held again when the wait returns).
class DLOCK_SCOPED_CAPABILITY Lock {
 public:
  explicit Lock(Mutex& m) DLOCK_ACQUIRE(m) : lock_(m.native()) {}
  ~Lock() DLOCK_RELEASE() = default;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  void lock() DLOCK_ACQUIRE() { lock_.lock(); }
  void unlock() DLOCK_RELEASE() { lock_.unlock(); }
  std::unique_lock<std::mutex>& native() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace dlock::detail
