"""bench/compare's server-IO cell must count what the lock does, not the server's own
background writes. ZooKeeper reaps empty containers (dlock's per-name lock parents) in the
background; dlock-bench's section (d) leaves thousands of them just before compare.sh
measures the IO of dlock's acquire + release on the same server, and every reaped container
is a write transaction (a zxid) inside the measured window: the full run of 2026-11-24 showed
2.43 znode writes per acquire + release where the lock does exactly 2 (one multi, one delete).

Run by ctest (label zookeeper) against the test server of scripts/servers.sh:
  io_excludes_reaping_test.py BENCH PROBE   (DLOCK_TEST_ZOOKEEPER_URI must be set)
Exit 0 when the measured writes per acquire + release are 2 within 1.5%, 1 otherwise. The
margin is the probe's own fixed writes, spread over its 500 acquires: its session's create and
close (2), the name's container made again after the reaper took it between the two probe runs
(a failed multi and a create: 2), and about one reaping of that container per second of
looping while it is empty between a release and the next acquire (3 each). The reaping left by
a run before is 100-200 writes in the window.
"""
import argparse
import os
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import compare  # noqa: E402
import scenarios  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    bench, probe = sys.argv[1], sys.argv[2]
    uri = os.environ.get("DLOCK_TEST_ZOOKEEPER_URI")
    if not uri:
        print("DLOCK_TEST_ZOOKEEPER_URI is not set", file=sys.stderr)
        return 1
    # The backlog: 1,000 lock parents left empty, as section (d) leaves them (a 1 s session
    # makes its renewal ticks short). The server reaps them over the next seconds.
    u = urllib.parse.urlsplit(uri)
    short = urllib.parse.urlunsplit(u._replace(path=u.path or "/", query=(u.query + "&" if u.query else "") +
                                               "session_timeout=1s"))
    subprocess.run([bench, "--uri", short, "--only", "d", "--leases", "1000", "--no-peers"], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)
    b = {"kind": "zookeeper", "uri": uri, "servers": ["zookeeper"]}
    ctx = compare.Ctx(argparse.Namespace(probe=probe, bench=bench, servers_script=None, quick=False))
    io = scenarios.io_per_op(ctx, b, 500)
    writes = io["znode_writes_per_op"]
    print("znode writes per acquire + release: %.3f (the lock does 2)" % writes)
    if not 2.0 <= writes <= 2.03:
        print("FAIL: the measured window counted writes that are not the lock's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
