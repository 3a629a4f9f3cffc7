# The job with redis-py: take lock "job" (wait at most 10 s), run the work, release.
# redis-py has no watchdog: work longer than the lock's timeout needs a renewal thread,
# and a lost lock must be noticed by hand. No fencing token.
import threading

import redis


def work():
    print("working")


r = redis.Redis(host="127.0.0.1", port=6379)
lock = r.lock("job", timeout=30)
if not lock.acquire(blocking_timeout=10):
    raise SystemExit("job is busy")
stop = threading.Event()


def renew():
    while not stop.wait(10):
        try:
            lock.reacquire()
        except redis.exceptions.LockError:
            print("lock lost")
            return


renewer = threading.Thread(target=renew, daemon=True)
renewer.start()
try:
    work()
finally:
    stop.set()
    renewer.join()
    lock.release()
