// Floors of the embedded backends: what the operating system (file://) or the process
// (mem://) costs for a lock done by hand. Reported for reading; no target is set on them.
#include <fcntl.h>
#include <unistd.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "floor.h"

namespace dlock_bench {

namespace {

struct FileFloorState {
  std::string path;
  ~FileFloorState() { ::unlink(path.c_str()); }
};

struct MemFloorState {
  std::mutex mu;
  std::unordered_map<std::string, int> held;
  const std::string name = "dlock-bench/floor";
};

}  // namespace

Floor make_file_floor(const dlock::Uri& uri) {
  auto st = std::make_shared<FileFloorState>();
  st->path = (uri.path.empty() ? std::string(".") : uri.path) + "/dlock-bench-floor." + std::to_string(getpid());
  Floor f;
  f.state = st;
  f.lock_label = "raw open + fcntl(F_OFD_SETLK) + close";
  f.lock = [s = st.get()] {
    int fd = ::open(s->path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("file floor: cannot open " + s->path);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    bool locked = ::fcntl(fd, F_OFD_SETLK, &fl) == 0;
    ::close(fd);  // closing the last descriptor drops the open-file-description lock
    if (!locked) throw std::runtime_error("file floor: F_OFD_SETLK failed on " + s->path);
  };
  return f;
}

Floor make_mem_floor() {
  auto st = std::make_shared<MemFloorState>();
  Floor f;
  f.state = st;
  f.lock_label = "raw std::mutex + unordered_map insert/erase";
  f.lock = [s = st.get()] {
    {
      std::lock_guard<std::mutex> g(s->mu);
      if (!s->held.emplace(s->name, 1).second) throw std::runtime_error("mem floor: name taken");
    }
    std::lock_guard<std::mutex> g(s->mu);
    s->held.erase(s->name);
  };
  return f;
}

}  // namespace dlock_bench
