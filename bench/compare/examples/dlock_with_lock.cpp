// The job with dlock: take lock "job" (wait at most 10 s), run the work, release. The lock
// is renewed while the work runs, freed if the process dies, and the work gets a fencing
// token. Same code for every backend: the URI picks mem, file, redis, mysql, postgres or zk.
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "dlock/adapters/with_lock.h"
#include "dlock/dlock.h"

static void work(std::uint64_t fencing_token) { std::printf("working, token %llu\n", (unsigned long long)fencing_token); }

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto locks = dlock::open(argv[1]);
  dlock::with_lock(*locks, {.key = "job", .wait = dlock::Wait::for_duration(std::chrono::seconds(10))},
                   [](const dlock::Lease& lease) { work(lease.fencing_token()); });
}
