#!/usr/bin/python3
"""Peer for dlock-bench on zk://: kazoo's Lock recipe, uncontended acquire + release.

Usage: kazoo_lock.py HOSTS ITERATIONS WARMUP PATH
Prints "key value" lines: version, iterations, p50_us, p99_us (or "error <text>").
kazoo's Lock creates a protected ephemeral-sequential node, lists the children and deletes
the node on release: 3 requests per cycle.
"""
import sys
import time

try:
    import kazoo.version
    from kazoo.client import KazooClient
except ImportError as e:  # python3-kazoo not installed
    print("error kazoo not installed (%s)" % e)
    sys.exit(0)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))]


def main():
    hosts, n, warm, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=10)
    lock = zk.Lock(path, "bench")
    for _ in range(warm):
        lock.acquire()
        lock.release()
    lat = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        lock.acquire()
        lock.release()
        lat.append((time.perf_counter_ns() - t0) / 1000.0)
    zk.stop()
    zk.close()
    print("version %s" % kazoo.version.__version__)
    print("iterations %d" % n)
    print("p50_us %.1f" % pct(lat, 50))
    print("p99_us %.1f" % pct(lat, 99))


if __name__ == "__main__":
    main()
