"""Runs the peer libraries (peers.py, and Curator through dlock-bench's zookeeper rows) for
bench/compare: uncontended acquire + release, contended hand-off, requests while waiting."""
import json
import os
import subprocess
import sys
import time

import counters

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's, which sees python3-redis, -kazoo, -tooz, ...

# group -> [(peer id in peers.py, label, example file)]
PEERS = {
    "redis": [("redis-py", "redis-py Lock", "redis_py.py"), ("tooz-redis", "tooz redis driver", "tooz_lock.py")],
    "zookeeper": [("kazoo", "kazoo Lock", "kazoo_lock.py"), ("tooz-zookeeper", "tooz zookeeper driver", "tooz_lock.py")],
    "mysql": [("mysqldb", "MySQLdb GET_LOCK", "mysqldb_get_lock.py"), ("tooz-mysql", "tooz mysql driver", "tooz_lock.py")],
    "postgres": [("psycopg2", "psycopg2 pg_advisory_lock", "psycopg2_advisory.py"),
                 ("tooz-postgresql", "tooz postgresql driver", "tooz_lock.py")],
}


def _run(args, timeout):
    p = subprocess.run([PYTHON, os.path.join(HERE, "peers.py"), *map(str, args)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError("peers.py gave nothing (exit %d): %s" % (p.returncode, p.stderr.strip()[-160:]))
    res = json.loads(lines[-1])
    if "error" in res:
        raise RuntimeError(res["error"])
    return res


def _uncontended(ctx, b, row, args):
    """The peer's acquire + release loop; the server's IO and requests around it, per
    iteration (warm-up included; connecting adds a little)."""
    try:
        counters.settle(b["kind"], b["uri"])  # earlier runs' background writes are not the peer's
        before = counters.snapshot(b["kind"], b["uri"], ctx.pids(b))
    except Exception as e:  # noqa: BLE001 - the IO cells say why
        before, row["io"] = None, {"why": "server counters failed: %s" % e}
    res = _run(args, 120)
    if before is not None:
        time.sleep(0.5)  # postgres publishes a backend's counts when it exits
        after = counters.snapshot(b["kind"], b["uri"], ctx.pids(b))
        ops = res["iterations"] + max(1, int(args[4]) // 10)
        row["io"] = {k + "_per_op": v / ops for k, v in counters.delta(before, after).items()}
    return res


def _waiting(ctx, b, peer, name, seconds):
    """Server requests between the peer waiter's start and its timeout."""
    proc = subprocess.Popen([PYTHON, os.path.join(HERE, "peers.py"), peer, "wait", b["uri"], name, str(seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    before = after = None
    last = None
    for line in proc.stdout:
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if "waiting_from" in obj:
            before = counters.snapshot(b["kind"], b["uri"], ctx.pids(b))
        elif "waiting_until" in obj:
            after = counters.snapshot(b["kind"], b["uri"], ctx.pids(b))
        else:
            last = obj
    proc.wait(60)
    if last is None or "error" in last:
        raise RuntimeError((last or {}).get("error", "peer waiter gave nothing: " + proc.stderr.read()[-160:]))
    if last.get("acquired"):
        raise RuntimeError("the peer waiter was granted a held lock")
    return {"requests": counters.delta(before, after).get("requests"), "seconds": seconds}


def run_all(ctx, env, backend_rows):
    out = []
    by_group = {}
    for b in backend_rows:
        by_group.setdefault(b["group"], b)
    for group, peers in PEERS.items():
        b = by_group.get(group)
        if b is None:
            continue
        for peer, label, example in peers:
            print("compare: peer %s ..." % peer, file=sys.stderr, flush=True)
            row = {"id": label, "peer": peer, "group": group, "example": example, "kind": b["kind"]}
            name = "cmp-peer-%s-%s" % (peer, ctx.run_id)
            n, cap = (100, 1.0) if ctx.quick else (2000, 8)
            if ctx.quick:
                row["contended"] = row["waiting"] = {"why": "not run in --quick"}
            for key, fn in (
                ("uncontended", lambda: _uncontended(ctx, b, row, [peer, "uncontended", b["uri"], name, n, cap])),
                ("contended", lambda: _run([peer, "contended", b["uri"], name + "-c", 4, 1 if ctx.quick else 10], 180)),
                ("waiting", lambda: _waiting(ctx, b, peer, name + "-w", 1 if ctx.quick else 10)),
            ):
                if key in row:
                    continue
                try:
                    row[key] = fn()
                except Exception as e:  # noqa: BLE001 - the cell says why
                    row[key] = {"why": str(e).splitlines()[0][:120] if str(e) else type(e).__name__}
            out.append(row)
        if group == "zookeeper":
            out.append(curator_row(b) if not ctx.quick else {
                "id": "Curator InterProcessMutex", "peer": "curator", "group": "zookeeper", "example": "CuratorLock.java",
                **{k: {"why": "not run in --quick (JVM start-up)"} for k in ("uncontended", "contended", "waiting")}})
    return out


def curator_row(b):
    """Curator's figures come from dlock-bench's zookeeper run (a Java program it starts)."""
    row = {"id": "Curator InterProcessMutex", "peer": "curator", "group": "zookeeper", "example": "CuratorLock.java"}
    data = b.get("bench")
    rows = data.get("rows", []) if isinstance(data, dict) else []
    unc = [r for r in rows if r["what"].startswith("peer: Curator") and "acquire + release" in r["what"]]
    con = [r for r in rows if r["what"].startswith("peer: Curator") and "handoffs per second" in r["what"]]
    row["uncontended"] = ({"p50_us": unc[0].get("p50_us"), "p99_us": unc[0].get("p99_us")} if unc
                          else {"why": "no Curator row from dlock-bench (libcurator-*-java or java missing?)"})
    row["contended"] = ({"handoffs_per_s": con[0]["metrics"].get("handoffs_per_s"),
                         "why_p50": "the Curator program reports hand-offs/s only"} if con
                        else {"why": "no contended Curator row from dlock-bench"})
    row["waiting"] = {"why": "not measured (Java peer)"}
    return row


