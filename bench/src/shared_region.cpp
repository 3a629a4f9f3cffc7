#include "shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

namespace dlock_bench {

namespace {

std::size_t region_size(std::uint64_t workers, std::uint64_t capacity) {
  return sizeof(SharedHeader) + workers * capacity * sizeof(std::uint32_t);
}

void* map_fd(int fd, std::size_t size, const std::string& path) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map " + path + ": " + std::strerror(errno));
  return p;
}

}  // namespace

SharedRegion SharedRegion::create(std::uint32_t workers, std::uint64_t capacity) {
  std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  std::string templ = dir + "/dlock-bench.XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0) throw std::runtime_error("cannot create " + templ + ": " + std::strerror(errno));
  std::string path(buf.data());
  std::size_t size = region_size(workers, capacity);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    throw std::runtime_error("cannot size " + path + ": " + std::strerror(errno));
  }
  void* base = map_fd(fd, size, path);
  // The file is zero-filled; construct the header once, here, before any worker maps it.
  auto* h = new (base) SharedHeader{};
  h->magic = kRegionMagic;
  h->workers = workers;
  h->sample_capacity = capacity;
  h->last_holder.store(-1);
  return SharedRegion(std::move(path), base, size);
}

SharedRegion SharedRegion::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(SharedHeader)) {
    ::close(fd);
    throw std::runtime_error(path + " is not a dlock-bench region");
  }
  auto size = static_cast<std::size_t>(st.st_size);
  void* base = map_fd(fd, size, path);
  SharedRegion r(path, base, size);
  const SharedHeader& h = r.header();
  if (h.magic != kRegionMagic || h.workers > kMaxWorkers || region_size(h.workers, h.sample_capacity) > size)
    throw std::runtime_error(path + " is not a dlock-bench region");
  return r;
}

SharedRegion::SharedRegion(SharedRegion&& other) noexcept
    : path_(std::move(other.path_)), base_(other.base_), size_(other.size_), unlinked_(other.unlinked_) {
  other.base_ = nullptr;
  other.unlinked_ = true;
}

SharedRegion::~SharedRegion() {
  if (base_) ::munmap(base_, size_);
}

std::uint32_t* SharedRegion::samples(int index) const noexcept {
  auto* first = reinterpret_cast<std::uint32_t*>(static_cast<char*>(base_) + sizeof(SharedHeader));
  return first + static_cast<std::size_t>(index) * header().sample_capacity;
}

void SharedRegion::unlink() noexcept {
  if (!unlinked_ && !path_.empty()) ::unlink(path_.c_str());
  unlinked_ = true;
}

}  // namespace dlock_bench
