#!/usr/bin/python3
"""The backend comparison (issue 13): every compiled dlock backend and every peer library,
measured in one run on one machine. Run it through bench/compare.sh, which starts private
servers and builds the binaries; see bench/README.md ("Backend comparison").

  compare.py --bench BIN --probe BIN --servers-script PATH --out DIR [--quick] [--only ID,...]
  compare.py --render RUN.json --out DIR      (rewrite .md and .svg from a run's JSON)

Writes DIR/<date>.md, DIR/<date>.json and DIR/<date>-*.svg. Exit 0 when every row was
produced (cells may still say why a figure is missing), 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import counters  # noqa: E402
import peers_run  # noqa: E402
import tables  # noqa: E402
import scenarios  # noqa: E402

LEASE_S = 3  # short lease / session for dead-holder, renewal and crash (scales with it)


def backends(env, tmpdir):
    """The dlock rows: id, URI, servers it needs, kind (for counters), short-lease URI."""
    redis = env.get("DLOCK_TEST_REDIS_URI")
    mysql = env.get("DLOCK_TEST_MYSQL_URI")
    pg = env.get("DLOCK_TEST_POSTGRES_URI")
    zk = env.get("DLOCK_TEST_ZOOKEEPER_URI")
    zk3 = env.get("DLOCK_TEST_ZOOKEEPER3_URI")

    def q(uri, extra):
        return uri + ("&" if "?" in uri else "?") + extra if extra else uri

    rows = [
        {"id": "mem", "uri": "mem://", "servers": [], "kind": None, "group": "embedded"},
        {"id": "file", "uri": "file://" + tmpdir, "servers": [], "kind": None, "group": "embedded"},
    ]
    if redis:
        rows.append({"id": "redis", "uri": redis, "servers": ["redis"], "kind": "redis", "group": "redis",
                     "short": "lease=%ds" % LEASE_S})
    if mysql:
        rows.append({"id": "mysql mode=row", "uri": q(mysql, "mode=row"), "servers": ["mariadb"], "kind": "mysql",
                     "group": "mysql", "short": "session_timeout=%ds" % LEASE_S})
        rows.append({"id": "mysql mode=lease", "uri": q(mysql, "mode=lease"), "servers": ["mariadb"],
                     "kind": "mysql", "group": "mysql", "short": "session_timeout=%ds" % LEASE_S})
    if pg:
        rows.append({"id": "postgres mode=advisory", "uri": q(pg, "mode=advisory"), "servers": ["postgres"],
                     "kind": "postgres", "group": "postgres", "short": "session_timeout=%ds" % LEASE_S})
        rows.append({"id": "postgres mode=lease", "uri": q(pg, "mode=lease"), "servers": ["postgres"],
                     "kind": "postgres", "group": "postgres", "short": "lease=%ds" % LEASE_S})
    if zk:
        rows.append({"id": "zookeeper", "uri": zk, "servers": ["zookeeper"], "kind": "zookeeper",
                     "group": "zookeeper", "short": "session_timeout=%ds" % LEASE_S})
    if zk3:
        rows.append({"id": "zookeeper 3 members", "uri": zk3,
                     "servers": ["zookeeper3-1", "zookeeper3-2", "zookeeper3-3"], "kind": "zookeeper",
                     "group": "zookeeper3", "short": "session_timeout=%ds" % LEASE_S})
    for b in rows:
        b["short_uri"] = q(b["uri"], b.get("short"))
    return rows


class Ctx:
    def __init__(self, args):
        self.probe = args.probe
        self.bench = args.bench
        self.script = args.servers_script
        self.dir = os.environ.get("DLOCK_SERVERS_DIR", "/tmp/dlock-servers")
        self.quick = args.quick
        self.run_id = "%x" % (time.time_ns() // 1000 % (1 << 40))

    def name(self, what):
        return "cmp-%s-%s" % (what, self.run_id)

    def pids(self, b):
        return counters.server_pids(self.dir, b["servers"])

    def servers(self, *args):
        # servers.sh starts a server over a SIGKILLed predecessor's files itself
        # (scripts/tests/servers_restart_after_kill.sh): one try, and its error if it fails.
        p = subprocess.run([self.script, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise RuntimeError("servers.sh %s failed: %s" % (" ".join(args), p.stderr.strip()[-160:]))


def run_bench(ctx, b, with_peers):
    """dlock-bench's sections a, b, c (and d in a full run) as JSON rows."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [ctx.bench, "--uri", b["uri"], "--json", f.name,
               "--only", "abc" if ctx.quick else "abcd"]
        if ctx.quick:
            cmd += ["--quick", "--iterations", "200", "--contended", "1s"]
        if not with_peers:
            cmd.append("--no-peers")
        env = dict(os.environ)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=600)
        try:
            with open(f.name) as j:
                data = json.load(j)
        except (OSError, ValueError):
            raise RuntimeError("dlock-bench gave no JSON (exit %d): %s" % (p.returncode, p.stderr.strip()[-200:]))
    # A section that failed leaves its rows out: say why, or the table only shows a gap.
    for e in data.get("errors", []):
        print("compare:   dlock-bench section %s failed: %s" % (e.get("section"), e.get("message")),
              file=sys.stderr, flush=True)
    return data


def measure(ctx, b, cell):
    """Fills b's figures; cell(key, fn) records fn() or the reason it failed."""
    # Curator (a JVM, twice) comes with dlock-bench's zookeeper peers: a full run only.
    data = cell("bench", lambda: run_bench(ctx, b, with_peers=b["group"] == "zookeeper" and not ctx.quick))
    b["bench"] = data if isinstance(data, dict) else None
    if b["kind"] is None:
        for k in ("io", "waiting", "crash", "availability"):
            b[k] = {"why": "no server: in-process" if b["id"] == "mem" else "no server: the kernel's file locks"}
    else:
        b["io"] = cell("io", lambda: scenarios.io_per_op(ctx, b, 200 if ctx.quick else 2000))
        b["waiting"] = cell("waiting", lambda: scenarios.waiting(ctx, b, 1 if ctx.quick else 10))
    if b["id"] == "mem":  # the probes are processes: they cannot share a process-local lock
        why = {"why": "process-local: a dead process takes its locks along"}
        b["dead_holder"], b["fifo"], b["renewal"] = why, {"why": "process-local: the probes are separate processes"}, \
            {"why": "no lease: held until released"}
        return
    if ctx.quick:
        b["dead_holder"] = {"why": "not run in --quick (a lease per row)"}
    else:
        b["dead_holder"] = cell("dead_holder", lambda: scenarios.dead_holder(ctx, b))
    if not b.get("short"):
        b["renewal"] = {"why": "no lease: held until released or the process ends"}
    elif ctx.quick:
        b["renewal"] = {"why": "not run in --quick (3.5 leases per row)"}
    else:
        b["renewal"] = cell("renewal", lambda: scenarios.renewal(ctx, b, LEASE_S))
    b["fifo"] = cell("fifo", lambda: scenarios.fifo(ctx, b, hold_s=0.3 if ctx.quick else 1.5))
    if b["kind"] is not None:
        if ctx.quick:
            why = {"why": "not run in --quick (restarts servers)"}
            b["crash"], b["availability"] = why, why
        else:
            b["crash"] = cell("crash", lambda: scenarios.crash(ctx, b))
            b["availability"] = cell("availability", lambda: scenarios.availability(ctx, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--servers-script", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated row ids (debugging)")
    ap.add_argument("--render", metavar="JSON", help="only rewrite the results from a run's JSON")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            result = json.load(f)
        for b in result["backends"]:
            b["bench"] = {"rows": b.pop("bench_rows", [])}
        for p in tables.write_all(result, args.out, stamp=os.path.basename(args.render)[:-5]):
            print(p)
        return 0
    ctx = Ctx(args)
    t0 = time.monotonic()
    load_before = open("/proc/loadavg").read().split()[:3]
    tmpdir = tempfile.mkdtemp(prefix="dlock-compare-")
    rows = backends(os.environ, tmpdir)
    only = [x for x in args.only.split(",") if x]
    if only:
        rows = [b for b in rows if any(o in b["id"] for o in only)]
    failures = []
    for b in rows:
        print("compare: %s ..." % b["id"], file=sys.stderr, flush=True)

        def cell(key, fn, b=b):
            t = time.monotonic()
            try:
                return fn()
            except Exception as e:  # noqa: BLE001 - a cell says why it has no figure
                failures.append("%s %s: %s" % (b["id"], key, e))
                print("compare:   %s failed: %s" % (key, e), file=sys.stderr, flush=True)
                return {"why": "failed: %s" % str(e).splitlines()[0][:120]}
            finally:
                print("compare:   %s %.1f s" % (key, time.monotonic() - t), file=sys.stderr, flush=True)

        measure(ctx, b, cell)
    peer_rows = peers_run.run_all(ctx, os.environ, rows)
    result = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - (time.monotonic() - t0))),
        "quick": args.quick, "seconds": round(time.monotonic() - t0, 1),
        "loadavg_before": load_before, "loadavg_after": open("/proc/loadavg").read().split()[:3],
        "nproc": os.cpu_count(), "lease_s": LEASE_S, "backends": rows, "peers": peer_rows, "failures": failures,
    }
    paths = tables.write_all(result, args.out)
    for p in paths:
        print(p)
    missing = tables.missing_rows(result)
    if missing:
        print("compare: rows missing: " + ", ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
