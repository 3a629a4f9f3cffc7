"""Peer lines for dlock-bench on postgres://: uncontended acquire + release with
  tooz   tooz's postgresql driver (python3-tooz), coordinator.get_lock(name);
  psycopg2  a plain psycopg2 client: pg_try_advisory_lock(k) + pg_advisory_unlock(k).

Usage: pg_advisory_peers.py KIND HOST PORT DB USER ITERATIONS WARMUP NAME
The password (if any) comes in DLOCK_BENCH_PG_PASSWORD. Iterations stop after 8 s.
Prints "key value" lines: p50_us, p99_us, iterations, version; or "error <why>".
"""
import os
import sys
import time
import zlib


def measure(once, iterations, warmup):
    for _ in range(warmup):
        once()
    samples = []
    stop_at = time.monotonic() + 8
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        once()
        samples.append(time.perf_counter_ns() - t0)
        if time.monotonic() > stop_at:
            break
    samples.sort()

    def pct(p):
        rank = max(1, -(-len(samples) * p // 100))
        return samples[min(rank, len(samples)) - 1] / 1000.0

    print("p50_us", pct(50))
    print("p99_us", pct(99))
    print("iterations", len(samples))


def main():
    kind, host, port, db, user, iterations, warmup, name = sys.argv[1:9]
    password = os.environ.get("DLOCK_BENCH_PG_PASSWORD") or None
    iterations, warmup = int(iterations), int(warmup)
    if kind == "psycopg2":
        try:
            import psycopg2
        except ImportError:
            print("error python3-psycopg2 is not installed")
            return
        conn = psycopg2.connect(host=host, port=int(port), dbname=db, user=user or None, password=password)
        conn.autocommit = True
        cur = conn.cursor()
        key = zlib.crc32(name.encode())

        def once():
            cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            if not cur.fetchone()[0]:
                raise RuntimeError("peer lock was busy")
            cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
            cur.fetchone()

        measure(once, iterations, warmup)
        print("version", psycopg2.__version__.split()[0])
    elif kind == "tooz":
        try:
            import tooz
            import tooz.coordination
        except ImportError:
            print("error python3-tooz is not installed")
            return
        auth = user + (":" + password if password else "") + "@" if user else ""
        coord = tooz.coordination.get_coordinator(
            "postgresql://%s%s:%s/%s" % (auth, host, port, db), b"dlock-bench")
        coord.start()
        lock = coord.get_lock(name.encode())

        def once():
            if not lock.acquire(blocking=False):
                raise RuntimeError("peer lock was busy")
            lock.release()

        measure(once, min(iterations, 2000), min(warmup, 5))
        coord.stop()
        try:
            from importlib.metadata import version
            print("version", version("tooz"))
        except Exception:
            print("version ?")
    else:
        print("error unknown peer " + kind)


try:
    main()
except Exception as e:  # reported as a note, never a crash of the bench
    print("error %s: %s" % (type(e).__name__, e))
