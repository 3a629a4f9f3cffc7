# The job with tooz (any driver: redis://, zookeeper://, mysql://, postgresql://): take lock
# "job" (wait at most 10 s), run the work, release. start_heart keeps the membership alive.
import uuid

from tooz import coordination


def work():
    print("working")


coord = coordination.get_coordinator("redis://127.0.0.1:6379", uuid.uuid4().hex.encode())
coord.start(start_heart=True)
try:
    lock = coord.get_lock(b"job")
    if not lock.acquire(blocking=10):
        raise SystemExit("job is busy")
    try:
        work()
    finally:
        lock.release()
finally:
    coord.stop()
