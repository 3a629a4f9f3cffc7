"""What bench/compare measures with dlock-compare-probe (probe.cpp): each function returns a
dict of figures, or raises with a message the table shows instead of a figure.

Every probe prints "<event> <CLOCK_MONOTONIC ns> [detail]" lines; the driver times events
of several probes on that one clock (time.monotonic_ns() is the same clock).
"""
import os
import queue
import signal
import subprocess
import threading
import time

import counters


class Probe:
    """One running dlock-compare-probe; events() collects its lines as they come."""

    def __init__(self, binary, uri, *args):
        env = dict(os.environ, DLOCK_URI=uri)
        self.proc = subprocess.Popen([binary, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, text=True)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            parts = line.split(None, 2)
            if len(parts) >= 2:
                self.lines.put((parts[0], int(parts[1]), parts[2].strip() if len(parts) > 2 else ""))
        self.lines.put(("eof", time.monotonic_ns(), ""))

    def expect(self, *events, timeout=60.0):
        """Waits for the first of `events` (or eof/error) and returns (event, ns, detail)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("probe: no %s within %.0f s" % ("/".join(events), timeout))
            try:
                ev = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(ev)
            if ev[0] in events:
                return ev
            if ev[0] in ("error", "eof"):
                raise RuntimeError("probe: " + (ev[2] or "exited") + self._stderr_tail())

    def _stderr_tail(self):
        return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def finish(self, timeout=60):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        while True:  # drain
            try:
                ev = self.lines.get(timeout=2)
            except queue.Empty:
                break
            if ev[0] == "eof":
                break
            self.seen.append(ev)
        return self.seen


def io_per_op(ctx, b, n):
    """Server IO and requests per try_lock + release, over n of them in one probe."""
    name = ctx.name("io")
    Probe(ctx.probe, b["uri"], "loop", name, 1).finish()  # creates per-name state first
    counters.settle(b["kind"], b["uri"])  # earlier runs' background writes are not this one's
    before = counters.snapshot(b["kind"], b["uri"], ctx.pids(b), name)
    p = Probe(ctx.probe, b["uri"], "loop", name, n)
    p.expect("done", timeout=120)
    p.finish()
    time.sleep(0.5)  # postgres publishes a backend's counts when it exits
    after = counters.snapshot(b["kind"], b["uri"], ctx.pids(b), name)
    d = counters.delta(before, after)
    out = {k + "_per_op": v / n for k, v in d.items()}
    out["ops"] = n
    return out


def waiting(ctx, b, seconds):
    """Server requests while one probe waits `seconds` for a name another probe holds."""
    name = ctx.name("wait")
    h = Probe(ctx.probe, b["uri"], "hold", name, int(seconds * 1000 + 20000))
    h.expect("acquired")
    try:
        w = Probe(ctx.probe, b["uri"], "wait", name, int(seconds * 1000), 0)
        w.expect("start")  # connected: from here on only the wait talks to the server
        before = counters.snapshot(b["kind"], b["uri"], ctx.pids(b), name)
        ev = w.expect("timeout", "acquired", timeout=seconds + 30)
        after = counters.snapshot(b["kind"], b["uri"], ctx.pids(b), name)
        w.finish()
    finally:
        h.kill()
    if ev[0] != "timeout":
        raise RuntimeError("the waiter was granted a held lock")
    d = counters.delta(before, after)
    return {"requests": d.get("requests"), "seconds": seconds}


def dead_holder(ctx, b):
    """Time from SIGKILL of a holder process to a waiter (already waiting) being served."""
    name = ctx.name("dead")
    uri = b["short_uri"]
    h = Probe(ctx.probe, uri, "hold", name, 600000)
    h.expect("acquired")
    w = Probe(ctx.probe, uri, "wait", name, 120000, 0)
    w.expect("start")
    time.sleep(0.3)
    t_kill = time.monotonic_ns()
    h.proc.send_signal(signal.SIGKILL)
    h.finish()
    ev = w.expect("acquired", "timeout", timeout=150)
    w.finish()
    if ev[0] != "acquired":
        raise RuntimeError("not freed within 120 s")
    return {"seconds": (ev[1] - t_kill) / 1e9}


def renewal(ctx, b, lease_s):
    """A hold of 3.5 leases (short_uri's lease): still exclusive at 3.2 leases, never lost."""
    name = ctx.name("renew")
    h = Probe(ctx.probe, b["short_uri"], "hold", name, int(lease_s * 3500))
    h.expect("acquired")
    time.sleep(lease_s * 3.2)
    t = Probe(ctx.probe, b["short_uri"], "wait", name, 0, 0)
    ev = t.expect("timeout", "acquired")
    t.finish()
    h.finish(timeout=lease_s * 10 + 30)
    lost = any(e[0] == "lost" for e in h.seen)
    released = [e for e in h.seen if e[0] == "released"]
    release = released[0][2] if released else "none"
    return {"kept": ev[0] == "timeout" and not lost and release == "ok",
            "lost_signal": lost, "other_acquired_at_3_2_leases": ev[0] == "acquired", "release": release,
            "leases": 3.5}


def fifo(ctx, b, waiters=4, gap_s=0.15, hold_s=1.5):
    """Grants in arrival order: waiters arrive gap_s apart while one probe holds; fair mode
    where the backend claims it. Fraction of grants that went to the next in arrival order."""
    name = ctx.name("fifo")
    h = Probe(ctx.probe, b["uri"], "hold", name, int((waiters * gap_s + hold_s) * 1000), "fair")
    h.expect("acquired")
    ws = []
    for _ in range(waiters):
        w = Probe(ctx.probe, b["uri"], "wait", name, 60000, 100, "fair")
        ws.append((w.expect("start")[1], w))
        time.sleep(gap_s)
    grants = []
    for start, w in ws:
        ev = w.expect("acquired", "timeout", timeout=90)
        grants.append((ev[1], start))
        w.finish()
    h.finish()
    arrival = sorted(s for _, s in grants)
    order = [s for _, s in sorted(grants)]
    in_order = sum(1 for a, o in zip(arrival, order) if a == o)
    return {"fraction": in_order / waiters, "waiters": waiters}


def crash(ctx, b):
    """kill -9 the server(s) while a lock is held, restart through servers.sh: was the lock
    kept (no waiter served before the holder released) or lost, do tokens increase, how
    long after the restart until a waiter is served."""
    name = ctx.name("crash")
    uri = b["short_uri"]
    h = Probe(ctx.probe, uri, "hold", name, 8000)
    _, _, tok_h = h.expect("acquired")
    w = Probe(ctx.probe, uri, "wait", name, 120000, 0)
    w.expect("start")
    time.sleep(0.5)
    t_kill = time.monotonic_ns()
    for pid in ctx.pids(b):
        os.kill(pid, signal.SIGKILL)
    ctx.servers("start", *b["servers"])
    t_up = time.monotonic_ns()
    ev = w.expect("acquired", "timeout", timeout=150)
    w.finish()
    h.finish(timeout=60)
    if ev[0] != "acquired":
        raise RuntimeError("no waiter served within 120 s of the restart")
    lost = [e for e in h.seen if e[0] == "lost"]
    rel = [e for e in h.seen if e[0] in ("released", "release-error")]
    holder_end = rel[0][1] if rel else None
    kept = holder_end is not None and ev[1] >= holder_end and not lost
    overlap = (holder_end is None or ev[1] < holder_end) and not lost
    return {"kept": kept, "holder_told_lost": bool(lost), "unsafe_overlap": overlap,
            "tokens_increase": int(ev[2] or 0) > int(tok_h or 0), "token_before": int(tok_h or 0),
            "token_after": int(ev[2] or 0), "waiter_after_kill_s": (ev[1] - t_kill) / 1e9,
            "restart_s": (t_up - t_kill) / 1e9}


def availability(ctx, b):
    """What a failure does: zookeeper3 loses one member (kill -9) and must still lock; a
    single server is killed and an acquire must fail fast (unavailable), then it restarts."""
    name = ctx.name("avail")
    victims = b["servers"][:1]
    for pid in ctx.pids(b)[:1]:
        os.kill(pid, signal.SIGKILL)
    try:
        t0 = time.monotonic_ns()
        p = Probe(ctx.probe, b["uri"], "wait", name, 5000, 0)
        try:
            ev = p.expect("acquired", "timeout", timeout=60)
            res = {"locks": ev[0] == "acquired", "seconds": (ev[1] - t0) / 1e9}
        except RuntimeError as e:
            res = {"locks": False, "seconds": (time.monotonic_ns() - t0) / 1e9, "error": str(e)[:80]}
        p.finish()
    finally:
        ctx.servers("start", *victims)
    return res
