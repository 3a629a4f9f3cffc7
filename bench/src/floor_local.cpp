// Floors of the embedded backends: what the operating system (file://) or the process
// (mem://) costs for a lock done by hand. Reported for reading; no target is set on them.
#include <fcntl.h>
#include <unistd.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "floor.h"
#include "loop.h"

namespace dlock_bench {

Floor measure_file_floor(const dlock::Uri& uri, const Settings& settings) {
  Floor f;
  const std::string dir = uri.path.empty() ? "." : uri.path;
  const std::string path = dir + "/dlock-bench-floor." + std::to_string(getpid());
  f.lock_label = "raw open + fcntl(F_OFD_SETLK) + close";
  f.lock = time_loop(settings.warmup, settings.iterations, settings.loop_cap, [&] {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("file floor: cannot open " + path);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    bool locked = ::fcntl(fd, F_OFD_SETLK, &fl) == 0;
    ::close(fd);  // closing the last descriptor drops the open-file-description lock
    if (!locked) throw std::runtime_error("file floor: F_OFD_SETLK failed on " + path);
  });
  ::unlink(path.c_str());
  return f;
}

Floor measure_mem_floor(const Settings& settings) {
  Floor f;
  std::mutex mu;
  std::unordered_map<std::string, int> held;
  const std::string name = "dlock-bench/floor";
  f.lock_label = "raw std::mutex + unordered_map insert/erase";
  f.lock = time_loop(settings.warmup, settings.iterations, settings.loop_cap, [&] {
    {
      std::lock_guard<std::mutex> g(mu);
      if (!held.emplace(name, 1).second) throw std::runtime_error("mem floor: name taken");
    }
    std::lock_guard<std::mutex> g(mu);
    held.erase(name);
  });
  return f;
}

}  // namespace dlock_bench
