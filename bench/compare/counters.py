"""Server-side counters for bench/compare: what one server did between two snapshots.

snapshot(backend) -> dict of numbers; delta(a, b) -> dict. Keys:
  write_bytes, syscw, wchar  /proc/<pid>/io summed over the server's process tree
  requests                   redis: commands (INFO commandstats, our INFO calls excluded);
                             mysql: Questions (our SHOW excluded); postgres: transactions
                             (pg_stat_database xact_commit + xact_rollback, our read excluded);
                             zookeeper: packets received (mntr)
  fsyncs                     mysql: Innodb_data_fsyncs + Innodb_os_log_fsyncs;
                             postgres: pg_stat_wal.wal_sync (where the server has it)
  znode_writes               zookeeper: write transactions (zxid delta, the highest member's):
                             every create and delete of a znode, the lock's container included
Every reader raises on failure; the caller turns that into a cell saying why.
settle(kind, url) waits for the server's own background writes to stop before a window.
"""
import os
import socket
import time
import urllib.parse


def _children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


def proc_io(pid):
    """/proc/<pid>/io summed over pid and its descendants (postgres forks a backend per
    connection; an exited child's IO is added to its parent when reaped)."""
    total = {"write_bytes": 0, "syscw": 0, "wchar": 0}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/io" % p) as f:
                for line in f:
                    k, v = line.split(":")
                    if k in total:
                        total[k] += int(v)
        except OSError:
            continue
        todo.extend(_children(p))
    return total


def server_pids(servers_dir, servers):
    pids = []
    for s in servers:
        with open(os.path.join(servers_dir, s, "pid")) as f:
            pids.append(int(f.read().split()[0]))
    return pids


def _redis(url):
    import redis
    u = urllib.parse.urlsplit(url)
    r = redis.Redis(host=u.hostname, port=u.port)
    stats = r.info("commandstats")
    r.close()
    return {"requests": sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")}


def _mysql(url):
    import MySQLdb
    u = urllib.parse.urlsplit(url)
    c = MySQLdb.connect(host=u.hostname, port=u.port, user=u.username, passwd=u.password or "",
                        db=u.path.lstrip("/").split("?")[0])
    cur = c.cursor()
    cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN "
                "('Questions','Innodb_data_fsyncs','Innodb_os_log_fsyncs')")
    st = {k: int(v) for k, v in cur.fetchall()}
    c.close()
    # This connection's SHOW is itself one question: count from before it.
    return {"requests": st["Questions"] - 1,
            "fsyncs": st.get("Innodb_data_fsyncs", 0) + st.get("Innodb_os_log_fsyncs", 0)}


def _postgres(url):
    import psycopg2
    u = urllib.parse.urlsplit(url)
    c = psycopg2.connect(host=u.hostname, port=u.port, dbname=u.path.lstrip("/"), user=u.username,
                         password=u.password)
    c.autocommit = True
    cur = c.cursor()
    cur.execute("SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database")
    xacts = int(cur.fetchone()[0])
    out = {"requests": xacts}
    try:
        cur.execute("SELECT wal_sync FROM pg_stat_wal")
        out["fsyncs"] = int(cur.fetchone()[0])
    except psycopg2.Error:
        pass
    c.close()
    return out


def _four_letters(host, port, word):
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(word)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode()


def _zk(url, name):
    hosts = urllib.parse.urlsplit(url).netloc.split(",")
    packets, zxid = 0, 0
    for hp in hosts:  # every member: a client talks to one of them
        h, p = hp.rsplit(":", 1)
        try:
            mntr = _four_letters(h, p, b"mntr")
            srvr = _four_letters(h, p, b"srvr")
        except OSError:
            continue
        for line in mntr.splitlines():
            k, _, v = line.partition("\t")
            if k == "zk_packets_received":
                packets += int(v)
        for line in srvr.splitlines():
            if line.startswith("Zxid:"):
                # Low 32 bits count the epoch's transactions; a new epoch (restart) resets them.
                zxid = max(zxid, int(line.split(":", 1)[1].strip(), 16))
    return {"requests": packets, "znode_writes": zxid}


def settle(kind, url, quiet_s=1.5, cap_s=150):
    """Waits until the server has stopped writing on its own, so that a window measured next
    counts the measured client's writes only. ZooKeeper reaps empty containers (dlock's
    per-name lock parents) in the background: after a run that left thousands of them (section
    (d) of dlock-bench), every reaped one is a write transaction, at most 10,000 a minute. Quiet
    means no new zxid for quiet_s (the test servers reap every second). Other servers: nothing
    to wait for. Raises when the server is still writing after cap_s."""
    if kind != "zookeeper":
        return
    deadline = time.monotonic() + cap_s
    last, since = _zk(url, None)["znode_writes"], time.monotonic()
    while time.monotonic() - since < quiet_s:
        if time.monotonic() > deadline:
            raise RuntimeError("the server kept writing on its own for %d s (container reaping?): "
                               "no quiet window to measure in" % cap_s)
        time.sleep(0.1)
        now = _zk(url, None)["znode_writes"]
        if now != last:
            last, since = now, time.monotonic()


def snapshot(kind, url, pids, name=None):
    snap = {}
    for pid in pids:
        for k, v in proc_io(pid).items():
            snap[k] = snap.get(k, 0) + v
    if kind == "redis":
        snap.update(_redis(url))
    elif kind == "mysql":
        snap.update(_mysql(url))
    elif kind == "postgres":
        snap.update(_postgres(url))
    elif kind == "zookeeper":
        snap.update(_zk(url, name))
    return snap


def delta(a, b):
    return {k: b[k] - a[k] for k in b if k in a}
