#include "floor.h"

namespace dlock_bench {

Floor make_floor(const dlock::Uri& uri) {
  if (uri.scheme == "redis") return make_redis_floor(uri);
  if (uri.scheme == "file") return make_file_floor(uri);
  if (uri.scheme == "mem") return make_mem_floor();
#ifndef DLOCK_BENCH_NO_POSTGRES
  if (uri.scheme == "postgres" || uri.scheme == "postgresql") return make_postgres_floor(uri);
#endif
#ifdef DLOCK_BENCH_ZOOKEEPER
  if (uri.scheme == "zk" || uri.scheme == "zookeeper") return make_zookeeper_floor(uri);
#endif
#ifdef DLOCK_BENCH_MYSQL
  if (uri.scheme == "mysql" || uri.scheme == "mariadb" || uri.scheme == "mysql+unix") return make_mysql_floor(uri);
#endif
  return {};
}

}  // namespace dlock_bench
