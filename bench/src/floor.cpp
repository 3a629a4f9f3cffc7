#include "floor.h"

namespace dlock_bench {

Floor measure_floor(const dlock::Uri& uri, const Settings& settings) {
  if (uri.scheme == "redis") return measure_redis_floor(uri, settings);
  if (uri.scheme == "file") return measure_file_floor(uri, settings);
  if (uri.scheme == "mem") return measure_mem_floor(settings);
  return {};
}

}  // namespace dlock_bench
