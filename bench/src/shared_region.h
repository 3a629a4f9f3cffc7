// The shared-memory file through which the contenders of (b) stamp release times, count
// acquisitions and store latency samples. Works the same between threads and processes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dlock_bench {

inline constexpr int kMaxWorkers = 16;
inline constexpr std::uint32_t kRegionMagic = 0x646c6b62;  // "dlkb"

enum class WorkerState : std::uint32_t { starting = 0, ready = 1, done = 2, failed = 3 };

struct alignas(64) WorkerSlot {
  std::atomic<std::uint32_t> state;
  std::atomic<std::uint64_t> acquisitions;     // in the measured window
  std::atomic<std::uint64_t> handoffs_in;      // acquisitions right after another worker's release
  std::atomic<std::uint64_t> self_reacquires;  // acquisitions right after its own release
  std::atomic<std::uint64_t> samples;          // handoff latencies stored in its sample array
  std::atomic<std::uint64_t> window_cpu_ns;    // its process's CPU during the window (processes only)
  std::atomic<std::uint64_t> release_retries;  // releases answered unavailable and sent again
  char error[240];                             // why it failed, NUL-terminated
};

struct SharedHeader {
  std::uint32_t magic;
  std::uint32_t workers;
  std::uint64_t sample_capacity;  // per worker
  // Written by the holder just before it releases; read by the next holder.
  alignas(64) std::atomic<std::uint64_t> release_ns;
  std::atomic<std::int32_t> last_holder;  // worker index, -1 before the first acquisition
  // Mutual exclusion check: holders increment on acquire, decrement before release.
  alignas(64) std::atomic<std::uint32_t> holding;
  std::atomic<std::uint64_t> violations;
  alignas(64) std::atomic<std::uint32_t> go;
  std::atomic<std::uint32_t> stop;
  WorkerSlot slots[kMaxWorkers];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "atomics must work across processes");

// A mapping of the region. Move-only; unmaps on destruction.
class SharedRegion {
 public:
  // Creates a new region file (in /dev/shm when it exists) sized for `workers` x `capacity`
  // samples and initialises it. Throws std::runtime_error.
  static SharedRegion create(std::uint32_t workers, std::uint64_t capacity);
  // Maps an existing region created by the parent. Throws std::runtime_error.
  static SharedRegion open(const std::string& path);

  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&&) = delete;
  ~SharedRegion();

  SharedHeader& header() const noexcept { return *static_cast<SharedHeader*>(base_); }
  // Worker `index`'s latency samples (ns, clamped to 32 bits).
  std::uint32_t* samples(int index) const noexcept;
  const std::string& path() const noexcept { return path_; }
  // Removes the file (the mapping stays valid). Idempotent.
  void unlink() noexcept;

 private:
  SharedRegion(std::string path, void* base, std::size_t size) : path_(std::move(path)), base_(base), size_(size) {}
  std::string path_;
  void* base_;
  std::size_t size_;
  bool unlinked_ = false;
};

}  // namespace dlock_bench
