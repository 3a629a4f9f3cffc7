"""Turns bench/compare's measurements into the results: <date>.md (tables, targets, machine
load), <date>.json (everything measured) and <date>-*.svg (gnuplot, when installed).
A cell without a figure says why; nothing here invents a figure."""
import json
import os
import re
import shutil
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "examples")
DLOCK_EXAMPLE = "dlock_with_lock.cpp"


def loc(example):
    """Lines of application code: non-blank lines that are not only a comment."""
    path = os.path.join(EXAMPLES, example)
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f]
    except OSError:
        return None
    return sum(1 for ln in lines if ln and not ln.startswith(("#", "//", "*", "/*", '"""')))


def _bench_rows(b):
    data = b.get("bench")
    return data.get("rows", []) if isinstance(data, dict) else []


def _row(rows, prefix):
    for i, r in enumerate(rows):
        if r["what"].startswith(prefix):
            return i, r
    return None, None


def dlock_figures(b):
    """Speed figures of one backend from its dlock-bench JSON."""
    rows = _bench_rows(b)
    f = {}
    i, r = _row(rows, "dlock try_lock + release (uncontended)")
    if r:
        f["p50_us"], f["p99_us"] = r.get("p50_us"), r.get("p99_us")
        if "requests_per_iteration" in r["metrics"]:  # redis: MONITOR-counted requests sent
            f["requests_per_op"] = r["metrics"]["requests_per_iteration"]
        ratio = r["metrics"].get("ratio_to_floor_p50")
        if not ratio and i > 0 and rows[i - 1]["what"].startswith("raw") and rows[i - 1].get("p50_us"):
            ratio = r["p50_us"] / rows[i - 1]["p50_us"]  # the same run's floor row, no ratio given
        if ratio and i > 0:
            f["floor_ratio"], f["floor_what"], f["floor_p50_us"] = ratio, rows[i - 1]["what"], rows[i - 1].get("p50_us")
    _, r = _row(rows, "handoffs per second")
    if r:
        f["handoffs_per_s"] = r["metrics"].get("handoffs_per_s")
    _, r = _row(rows, "fairness and exclusion")
    if r and r["metrics"].get("release_retries"):  # releases answered unavailable, sent again
        f["release_retries"] = int(r["metrics"]["release_retries"])
    _, r = _row(rows, "handoff latency")
    if r:
        f["handoff_p50_us"] = r.get("p50_us")
        handoffs = r["metrics"].get("handoffs")
    else:
        handoffs = None
    _, r = _row(rows, "CPU per 1,000 handoffs")
    if r:
        win = r["metrics"].get("window_cpu_s")
        if win is not None and handoffs:
            f["cpu_ms_per_1000_handoffs"] = win * 1000.0 / handoffs * 1000.0
        elif r["metrics"].get("cpu_s_per_1000_handoffs"):
            f["cpu_ms_per_1000_handoffs"] = r["metrics"]["cpu_s_per_1000_handoffs"] * 1000.0
    _, r = _row(rows, "dlock re-acquire")
    if r:
        f["reentry_p50_us"] = r.get("p50_us")
    for r in rows:
        m = r.get("metrics", {})
        for k in ("requests_per_100_leases", "round_trips_per_100_leases_upper_bound"):
            if k in m and "renewal_per_100" not in f:
                f["renewal_per_100"] = (m[k], k)
    return f


def _num(v, unit="", digits=None):
    if v is None:
        return None
    if digits is None:
        digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    s = "{:,.{d}f}".format(v, d=digits)
    return s + unit


def _why(d, key=None):
    if isinstance(d, dict) and "why" in d:
        return d["why"]
    return "not measured" if key is None else "not measured (%s)" % key


def speed_cells(f, why_src):
    if "p50_us" not in f:
        return ["(%s)" % _why(why_src)] * 2
    lat = "%s / %s" % (_num(f["p50_us"]), _num(f["p99_us"]))
    fl = ("%s× (%s %s µs)" % (_num(f["floor_ratio"], digits=2), f["floor_what"].split(" (")[0], _num(f["floor_p50_us"]))
          if "floor_ratio" in f else "no wire floor (no network)")
    return [lat, fl]


def io_cells(io, kind, sent=None):
    if not isinstance(io, dict) or "why" in io:
        return ["(%s)" % _why(io)] * 4
    wb = "%s B / %s writes (%s B via write())" % (_num(io.get("write_bytes_per_op"), digits=0),
                                                   _num(io.get("syscw_per_op")), _num(io.get("wchar_per_op"), digits=0))
    fs = _num(io.get("fsyncs_per_op")) if "fsyncs_per_op" in io else {
        "redis": "none configured (appendonly no, no save)",
        "zookeeper": "no counter (forceSync, see SERVERS)"}.get(kind, "no counter")
    req_name = {"redis": "commands", "mysql": "statements", "postgres": "transactions",
                "zookeeper": "packets"}.get(kind, "requests")
    req = "%s %s" % (_num(io.get("requests_per_op")), req_name) if "requests_per_op" in io else "no counter"
    if kind == "redis" and "requests_per_op" in io:
        req = "%s incl. inside scripts" % req
        if sent is not None:
            req = "%s sent (%s)" % (_num(sent), req)
    zn = "%s writes (creates + deletes)" % _num(io["znode_writes_per_op"]) if "znode_writes_per_op" in io else (
        "(not counted: cversion of a reaped container)" if "znode_changes_per_op" in io else "—")
    return [wb, fs, req, zn]
