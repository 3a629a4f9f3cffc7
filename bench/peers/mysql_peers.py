"""Peer lines for dlock-bench (a) on mysql://: uncontended acquire + release with
  tooz  - tooz's mysql coordination driver (GET_LOCK on a PyMySQL connection), or
  mysqldb - a plain MySQLdb (mysqlclient) client doing GET_LOCK(name, 0) + RELEASE_LOCK.

Usage: mysql_peers.py tooz|mysqldb HOST PORT DB USER ITERATIONS WARMUP NAME
The password comes in DLOCK_BENCH_MYSQL_PASSWORD.
Prints "key value" lines: p50_us, p99_us, iterations, version; or "error <why>".
"""
import os
import sys
import time


def measure(once, iterations, warmup):
    for _ in range(warmup):
        once()
    samples = []
    for _ in range(iterations):
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


def main():
    kind, host, port, db, user, iterations, warmup, name = sys.argv[1:9]
    password = os.environ.get("DLOCK_BENCH_MYSQL_PASSWORD", "")
    iterations, warmup = int(iterations), int(warmup)
    if kind == "tooz":
        try:
            import tooz
            from tooz import coordination
        except ImportError:
            print("error python3-tooz is not installed (apt-get install python3-tooz python3-pymysql)")
            return
        url = "mysql://%s:%s@%s:%s/%s" % (user, password, host, port, db)
        coord = coordination.get_coordinator(url, b"dlock-bench")
        coord.start()
        lock = coord.get_lock(name.encode())

        def once():
            if not lock.acquire(blocking=False):
                raise RuntimeError("peer lock was busy")
            lock.release()

        measure(once, iterations, warmup)
        print("version", getattr(tooz, "__version__", "3.x"))
        coord.stop()
    else:
        try:
            import MySQLdb
        except ImportError:
            print("error python3-mysqldb is not installed (apt-get install python3-mysqldb)")
            return
        conn = MySQLdb.connect(host=host, port=int(port), user=user, passwd=password, db=db)
        cur = conn.cursor()

        def once():
            cur.execute("SELECT GET_LOCK(%s, 0)", (name,))
            if cur.fetchone()[0] != 1:
                raise RuntimeError("peer lock was busy")
            cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
            cur.fetchone()

        measure(once, iterations, warmup)
        print("version", ".".join(str(v) for v in MySQLdb.version_info[:3]))


try:
    main()
except Exception as e:  # noqa: BLE001 - reported as a note, the run goes on
    print("error", type(e).__name__, str(e).replace("\n", " ")[:200])
