// The shortest tour of dlock's API: open a provider by URI, try a lock, use its fencing
// token and lost signal, wait with a bound, release.
//   basic [URI]      (default mem://; try file:///tmp/locks or redis://127.0.0.1:6379)
#include <chrono>
#include <iostream>
#include <thread>

#include "dlock/dlock.h"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  try {
    // 1. One provider per service and URI; share it between threads.
    std::shared_ptr<dlock::ILockProvider> locks = dlock::open(argc > 1 ? argv[1] : "mem://");
    std::cout << "opened " << locks->uri() << " (fencing: " << locks->capabilities().fencing << ")\n";

    // 2. Try once. Not getting the lock is not an error: the optional is empty.
    std::optional<dlock::Lease> lease = locks->try_lock("report:2026-11-21");
    if (!lease) {
      std::cout << "someone else is writing the report\n";
      return 0;
    }

    // 3. The fencing token goes with every write to the protected resource, which keeps the
    //    highest token it saw and refuses smaller ones (a paused, expired holder cannot
    //    overwrite a newer holder's work).
    std::cout << "holding '" << lease->name() << "' with fencing token " << lease->fencing_token() << "\n";

    // 4. The lost signal: fires if the lock may no longer be held (renewal failed, session
    //    ended). Long work checks it between steps; on_lost() runs a callback instead.
    std::stop_token lost = lease->lost_token();
    lease->on_lost([] { std::cerr << "lock lost: stop writing\n"; });
    for (int step = 0; step < 3 && !lost.stop_requested(); ++step) std::this_thread::sleep_for(10ms);

    // 5. Another owner (here another thread) is kept out while we hold it.
    std::thread([&] {
      auto other = locks->try_lock("report:2026-11-21", dlock::Wait::for_duration(50ms));
      std::cout << "another thread got it too? " << (other ? "yes (bug!)" : "no") << "\n";
    }).join();

    // 6. Release (the destructor would too, best effort). True: it was still ours.
    std::cout << "released: " << lease->release() << "\n";

    // 7. The throwing form: acquire() with a bounded wait throws Error(timed_out) instead.
    dlock::Lease again = locks->acquire("report:2026-11-21", dlock::LockMode::exclusive,
                                        dlock::Wait::for_duration(2s), {.lease = 10s});
    std::cout << "next holder's token " << again.fencing_token() << " (larger)\n";
    return 0;
  } catch (const dlock::Error& e) {  // unavailable, invalid_argument, timed_out, …
    std::cerr << "basic: " << e.what() << "\n";
    return 1;
  }
}
