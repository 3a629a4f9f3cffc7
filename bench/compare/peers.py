#!/usr/bin/python3
"""Peer lock libraries in one harness, for bench/compare/compare.py.

Usage: peers.py PEER MODE URL NAME [ARGS]
  PEER  redis-py | tooz-redis | kazoo | tooz-zookeeper | tooz-mysql | mysqldb |
        tooz-postgresql | psycopg2
  MODE  uncontended ITERATIONS SECONDS_CAP   acquire + release in a loop, one process
        contended WORKERS SECONDS            WORKERS processes hand one name over for SECONDS
        wait SECONDS                         hold in one process, wait SECONDS in another
                                             (the driver counts server requests meanwhile)
  URL   redis://h:p  zk://h:p[,h:p]  mysql://user:pw@h:p/db  postgres://user@h:p/db
Prints one JSON object on stdout ({"error": why} when the peer is not installed).
Each peer is used as its documentation shows: blocking acquire, release; nothing tuned.
"""
import json
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import urllib.parse
import zlib


def parse(url):
    u = urllib.parse.urlsplit(url)
    return u


class Peer:
    """make() -> (acquire(blocking, timeout_s) -> bool, release(), close(), version)."""


def redis_py(url, name):
    import redis
    u = parse(url)
    r = redis.Redis(host=u.hostname, port=u.port)
    lock = r.lock(name, timeout=30)

    def acquire(blocking=True, timeout=None):
        return lock.acquire(blocking=blocking, blocking_timeout=timeout)

    return acquire, lock.release, r.close, redis.__version__


def tooz_peer(backend_url):
    def make(url, name):
        from importlib.metadata import version
        from tooz import coordination
        member = ("bench-%d-%d" % (os.getpid(), time.monotonic_ns())).encode()
        coord = coordination.get_coordinator(backend_url(url), member)
        coord.start()
        lock = coord.get_lock(name.encode())

        def acquire(blocking=True, timeout=None):
            return lock.acquire(blocking=timeout if (blocking and timeout) else blocking)

        return acquire, lock.release, coord.stop, version("tooz")
    return make


def kazoo_peer(url, name):
    import kazoo.exceptions
    import kazoo.version
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=parse(url).netloc, timeout=10.0)
    zk.start(timeout=10)
    lock = zk.Lock("/peer-kazoo/" + name, "bench")

    def acquire(blocking=True, timeout=None):
        try:
            return lock.acquire(blocking=blocking, timeout=timeout)
        except kazoo.exceptions.LockTimeout:  # kazoo raises where others return False
            return False

    def close():
        zk.stop()
        zk.close()

    return acquire, lock.release, close, kazoo.version.__version__


def mysqldb_peer(url, name):
    import MySQLdb
    u = parse(url)
    conn = MySQLdb.connect(host=u.hostname, port=u.port, user=u.username, passwd=u.password or "",
                           db=u.path.lstrip("/"), autocommit=True)
    cur = conn.cursor()

    def acquire(blocking=True, timeout=None):
        t = (timeout if timeout else 31536000) if blocking else 0
        cur.execute("SELECT GET_LOCK(%s, %s)", (name, t))
        return cur.fetchone()[0] == 1

    def release():
        cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
        cur.fetchone()

    return acquire, release, conn.close, ".".join(str(x) for x in MySQLdb.version_info[:3])


def psycopg2_peer(url, name):
    import psycopg2
    u = parse(url)
    conn = psycopg2.connect(host=u.hostname, port=u.port, dbname=u.path.lstrip("/"), user=u.username,
                            password=u.password)
    conn.autocommit = True
    cur = conn.cursor()
    key = zlib.crc32(name.encode())

    def acquire(blocking=True, timeout=None):
        if not blocking:
            cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            return cur.fetchone()[0]
        cur.execute("SET lock_timeout = %s", ("%dms" % int(timeout * 1000) if timeout else "0",))
        try:
            cur.execute("SELECT pg_advisory_lock(%s)", (key,))
            cur.fetchone()
            return True
        except psycopg2.errors.LockNotAvailable:
            return False

    def release():
        cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
        cur.fetchone()

    return acquire, release, conn.close, psycopg2.__version__.split()[0]


def tooz_mysql_url(url):
    return url


def tooz_pg_url(url):
    u = parse(url)
    return urllib.parse.urlunsplit(("postgresql",) + tuple(u)[1:])


PEERS = {
    "redis-py": redis_py,
    "tooz-redis": tooz_peer(lambda url: url),
    "kazoo": kazoo_peer,
    "tooz-zookeeper": tooz_peer(lambda url: "zookeeper://" + parse(url).netloc.split(",")[0]),
    "tooz-mysql": tooz_peer(tooz_mysql_url),
    "mysqldb": mysqldb_peer,
    "tooz-postgresql": tooz_peer(tooz_pg_url),
    "psycopg2": psycopg2_peer,
}


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    rank = max(1, -(-len(xs) * p // 100))
    return xs[min(rank, len(xs)) - 1]


def uncontended(make, url, name, iterations, cap_s):
    acquire, release, close, ver = make(url, name)
    for _ in range(max(1, iterations // 10)):
        acquire()
        release()
    lat = []
    stop = time.monotonic() + cap_s
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        if not acquire():
            raise RuntimeError("uncontended acquire failed")
        release()
        lat.append((time.perf_counter_ns() - t0) / 1000.0)
        if time.monotonic() > stop:
            break
    close()
    return {"version": ver, "iterations": len(lat), "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}


def worker(make, url, name, index, shared, start_at, stop_at, out):
    try:
        acquire, release, close, _ = make(url, name)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        out.put({"error": "%s: %s" % (type(e).__name__, e)})
        return
    while time.monotonic() < start_at:
        time.sleep(0.001)
    cpu0 = time.process_time()
    handoffs, acquisitions, overlaps, lat = 0, 0, 0, []
    while time.monotonic() < stop_at:
        if not acquire(True, max(0.001, stop_at - time.monotonic())):
            break
        now = time.monotonic_ns()
        with shared.get_lock():
            if shared[2]:
                overlaps += 1
            shared[2] = 1
            last, stamp = shared[0], shared[1]
        acquisitions += 1
        if last != index and stamp:
            handoffs += 1
            lat.append((now - stamp) / 1000.0)
        with shared.get_lock():
            shared[0], shared[1], shared[2] = index, time.monotonic_ns(), 0
        release()
    cpu = time.process_time() - cpu0
    close()
    out.put({"handoffs": handoffs, "acquisitions": acquisitions, "overlaps": overlaps, "cpu_s": cpu, "lat": lat})


def contended(make, url, name, workers, seconds):
    shared = mp.Array("q", 3)  # last holder index, its release stamp (ns), held flag
    shared[0] = -1
    out = mp.Queue()
    start_at = time.monotonic() + 3.0  # every worker connected first
    stop_at = start_at + seconds
    procs = [mp.Process(target=worker, args=(make, url, name, i, shared, start_at, stop_at, out))
             for i in range(workers)]
    for p in procs:
        p.start()
    results, deadline = [], time.monotonic() + 3.0 + seconds + 60
    for _ in procs:
        try:
            results.append(out.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            break
    for p in procs:
        p.join(1)
        if p.is_alive():
            p.kill()
    if len(results) < len(procs):
        return {"error": "%d of %d workers never returned from acquire/release within the window + 60 s"
                         % (len(procs) - len(results), len(procs))}
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        return {"error": errors[0]}
    lat = [x for r in results for x in r["lat"]]
    handoffs = sum(r["handoffs"] for r in results)
    cpu = sum(r["cpu_s"] for r in results)
    return {"handoffs_per_s": handoffs / seconds, "handoff_p50_us": pct(lat, 50),
            "acquisitions": sum(r["acquisitions"] for r in results), "handoffs": handoffs,
            "overlaps": sum(r["overlaps"] for r in results),
            "cpu_ms_per_1000_handoffs": cpu * 1000.0 / handoffs * 1000.0 if handoffs else None}


def holder(make, url, name, ready, done):
    acquire, release, close, _ = make(url, name)
    acquire()
    ready.set()
    done.wait(120)
    release()
    close()


def wait(make, url, name, seconds):
    ready, done = mp.Event(), mp.Event()
    h = mp.Process(target=holder, args=(make, url, name, ready, done))
    h.start()
    if not ready.wait(30):
        h.kill()
        return {"error": "the holder did not acquire"}
    acquire, release, close, _ = make(url, name)
    print(json.dumps({"waiting_from": time.monotonic_ns()}), flush=True)
    t0 = time.monotonic()
    got = []
    # A thread: some peers block past their bound (tooz's SQL drivers); the count stops anyway.
    t = threading.Thread(target=lambda: got.append(acquire(True, seconds)), daemon=True)
    t.start()
    t.join(seconds + 0.5)
    waited = time.monotonic() - t0
    print(json.dumps({"waiting_until": time.monotonic_ns()}), flush=True)
    done.set()
    h.join(5)
    if h.is_alive():
        h.kill()
    res = {"acquired": bool(got and got[0]), "waited_s": waited, "bound_kept": not t.is_alive()}
    print(json.dumps(res), flush=True)
    os._exit(0)  # a still-blocked waiter thread must not keep the process


def main():
    peer, mode, url, name = sys.argv[1:5]
    args = sys.argv[5:]
    make = PEERS[peer]
    try:
        make.__call__  # noqa: B018
        if mode == "uncontended":
            res = uncontended(make, url, name, int(args[0]), float(args[1]))
        elif mode == "contended":
            res = contended(make, url, name, int(args[0]), float(args[1]))
        elif mode == "wait":
            res = wait(make, url, name, float(args[0]))
        else:
            raise SystemExit("unknown mode " + mode)
    except ImportError as e:
        res = {"error": "not installed (%s)" % e}
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()
