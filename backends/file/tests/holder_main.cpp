// dlock_file_holder URI NAME exclusive|shared
// Acquires NAME through dlock::open(URI), prints "token <n>" on stdout, then sleeps until
// killed. The tests use it as "another process" and kill it with SIGKILL.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>

#include "dlock/dlock.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s URI NAME exclusive|shared\n", argv[0]);
    return 2;
  }
  try {
    auto provider = dlock::open(argv[1]);
    auto mode = std::strcmp(argv[3], "shared") == 0 ? dlock::LockMode::shared
                                                     : dlock::LockMode::exclusive;
    dlock::Lease lease = provider->acquire(argv[2], mode, dlock::Wait::forever());
    std::printf("token %llu\n", static_cast<unsigned long long>(lease.fencing_token()));
    std::fflush(stdout);
    for (;;) ::pause();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "holder: %s\n", e.what());
    return 1;
  }
}
