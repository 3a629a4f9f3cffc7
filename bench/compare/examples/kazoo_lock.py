# The job with kazoo: take lock "job" (wait at most 10 s), run the work, release.
# The session keeps the lock (no renewal to write); a lost session must be watched by hand.
from kazoo.client import KazooClient, KazooState


def work():
    print("working")


zk = KazooClient(hosts="127.0.0.1:2181")
zk.start()
zk.add_listener(lambda state: state == KazooState.LOST and print("lock lost"))
lock = zk.Lock("/locks/job")
try:
    if not lock.acquire(timeout=10):
        raise SystemExit("job is busy")
    try:
        work()
    finally:
        lock.release()
finally:
    zk.stop()
    zk.close()
