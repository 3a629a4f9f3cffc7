"""Peer line for dlock-bench (a): redis-py's redis.lock.Lock, uncontended acquire + release.

Usage: redis_py_lock.py HOST PORT DB ITERATIONS WARMUP NAME
The password (if any) comes in DLOCK_BENCH_REDIS_PASSWORD (user: DLOCK_BENCH_REDIS_USER).
Prints "key value" lines: p50_us, p99_us, iterations, version; or "error <why>".
"""
import os
import sys
import time

try:
    import redis
except ImportError:
    print("error python3-redis is not installed (apt-get install python3-redis)")
    sys.exit(0)


def main():
    host, port, db, iterations, warmup, name = sys.argv[1:7]
    client = redis.Redis(host=host, port=int(port), db=int(db),
                         username=os.environ.get("DLOCK_BENCH_REDIS_USER") or None,
                         password=os.environ.get("DLOCK_BENCH_REDIS_PASSWORD") or None)
    lock = client.lock(name, timeout=30)

    def once():
        if not lock.acquire(blocking=False):
            raise RuntimeError("peer lock was busy")
        lock.release()

    for _ in range(int(warmup)):
        once()
    samples = []
    for _ in range(int(iterations)):
        t0 = time.perf_counter_ns()
        once()
        samples.append(time.perf_counter_ns() - t0)
    samples.sort()

    def pct(p):
        rank = max(1, -(-len(samples) * p // 100))
        return samples[min(rank, len(samples)) - 1] / 1000.0

    print("p50_us", pct(50))
    print("p99_us", pct(99))
    print("iterations", len(samples))
    print("version", redis.__version__)


try:
    main()
except Exception as e:  # reported as a line of the table, never a traceback
    print("error", type(e).__name__, str(e).replace("\n", " ")[:200])
