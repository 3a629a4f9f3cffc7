"""The results files of bench/compare: the Markdown tables, the targets, the JSON and the
SVG plots. Figures come from render.py's readers; a cell without one says why."""
import json
import os
import shutil
import subprocess
import time

from render import _bench_rows, _num, _why, dlock_figures, io_cells, loc, speed_cells, DLOCK_EXAMPLE

GROUP_ORDER = ["embedded", "redis", "mysql", "postgres", "zookeeper", "zookeeper3"]
PEER_NA = "not measured for peers"


def ordered(result):
    """dlock rows, each group followed by its peers: [(kind, row)]."""
    out = []
    for g in GROUP_ORDER:
        out += [("dlock", b) for b in result["backends"] if b["group"] == g]
        out += [("peer", p) for p in result["peers"] if p["group"] == g]
    return out


def _floor_of(result, group):
    for b in result["backends"]:
        if b["group"] == group and "floor_p50_us" in b.get("figures", {}):
            return b["figures"]
    return None


def speed_row(result, kind, r):
    if kind == "dlock":
        f = r["figures"]
        cells = ["**dlock %s**" % r["id"]] + speed_cells(f, r.get("bench"))
        con = f if "handoffs_per_s" in f else None
        io = io_cells(r.get("io"), r["kind"], f.get("requests_per_op"))
        lines = r["loc"]
    else:
        u = r.get("uncontended", {})
        fl = _floor_of(result, r["group"])
        if "p50_us" in u and u["p50_us"] is not None:
            ratio = ("%s× (same floor)" % _num(u["p50_us"] / fl["floor_p50_us"], digits=2)) if fl else "no floor"
            cells = ["%s" % r["id"] + (" %s" % u["version"] if "version" in u else ""),
                     "%s / %s" % (_num(u["p50_us"]), _num(u["p99_us"])), ratio]
        else:
            cells = [r["id"], "(%s)" % _why(u)] + ["(%s)" % _why(u)]
        c = r.get("contended", {})
        con = c if "handoffs_per_s" in c else None
        io = io_cells(r.get("io"), r["kind"]) if "io" in r else ["(%s)" % PEER_NA] * 4
        lines = r["loc"]
        if con is None:
            cells += ["(%s)" % _why(c)] * 3
    if con is not None:
        retried = con.get("release_retries")
        cells += [_num(con["handoffs_per_s"], digits=0) +
                  (" (%d releases answered unavailable, sent again)" % retried if retried else ""),
                  _num(con.get("handoff_p50_us")) or "(%s)" % con.get("why_p50", "no hand-off in the window"),
                  _num(con.get("cpu_ms_per_1000_handoffs"), digits=0) or "(not measured)"]
    elif kind == "dlock":
        cells += ["(%s)" % _why(r.get("bench"))] * 3
    cells += io
    cells.append(str(lines) if lines is not None else "(no example)")
    return cells


def _s(v):
    return "%s s" % _num(v, digits=2)


def property_row(result, kind, r):
    if kind == "peer":
        w = r.get("waiting", {})
        wait = ("%s in %d s" % (_num(w["requests"], digits=0), w["seconds"]) if w.get("requests") is not None
                else "(%s)" % _why(w))
        na = "(%s)" % PEER_NA
        return [r["id"], na, na, na, na, na, wait, na, na, na]
    f = r["figures"]
    c = r.get("crash", {})
    if "kept" in c:
        state = ("kept" if c["kept"] else "lost, holder told" if c["holder_told_lost"]
                 else "**lost, holder not told (unsafe)**" if c["unsafe_overlap"] else "lost")
        tok = "yes (%d → %d)" % (c["token_before"], c["token_after"]) if c["tokens_increase"] else \
            "**no** (%d → %d)" % (c["token_before"], c["token_after"])
        served = "%s after kill -9 (servers.sh start took %s)" % (_s(c["waiter_after_kill_s"]), _s(c["restart_s"]))
    else:
        state = tok = served = "(%s)" % _why(c)
    fi = r.get("fifo", {})
    fifo = "%s of %d" % (_num(fi["fraction"], digits=2), fi["waiters"]) if "fraction" in fi else "(%s)" % _why(fi)
    reent = _num(f.get("reentry_p50_us")) + " µs" if f.get("reentry_p50_us") is not None else "(not measured)"
    w = r.get("waiting", {})
    wait = ("%s in %d s" % (_num(w["requests"], digits=0), w["seconds"]) if w.get("requests") is not None
            else "(%s)" % _why(w))
    d = r.get("dead_holder", {})
    dead = _s(d["seconds"]) if "seconds" in d else "(%s)" % _why(d)
    rn = r.get("renewal", {})
    if "kept" in rn:
        ren = "yes" if rn["kept"] else ("**no** (%s)" % ", ".join(
            x for x in ("lost signal" if rn["lost_signal"] else "",
                        "another client acquired it at 3.2 leases" if rn.get("other_acquired_at_3_2_leases") else "",
                        "release answered %s" % rn["release"] if rn.get("release", "ok") != "ok" else "") if x)
                                         ).replace(" ()", "")
    else:
        ren = "(%s)" % _why(rn)
    if "renewal_per_100" in f:
        v, k = f["renewal_per_100"]
        ren += "; %s %s per 100 leases" % (_num(v), "requests" if k.startswith("requests") else "round trips (≤)")
    a = r.get("availability", {})
    if "locks" in a:
        if len(r["servers"]) > 1:
            av = ("1 of %d members down: locks in %s" % (len(r["servers"]), _s(a["seconds"])) if a["locks"]
                  else "1 of %d down: **no lock** (%s)" % (len(r["servers"]), a.get("error", "timeout")))
        else:
            av = ("server down: acquire fails after %s (%s)" % (_s(a["seconds"]), a.get("error", "timeout")[:60])
                  if not a["locks"] else "server down yet acquired?")
    else:
        av = "(%s)" % _why(a)
    return ["dlock " + r["id"], state, tok, served, fifo, reent, wait, dead, ren, av]


SPEED_HEAD = ["", "uncontended p50 / p99 µs", "p50 × wire floor", "hand-offs/s (4 processes)", "hand-off p50 µs",
              "CPU ms / 1,000 hand-offs", "server IO per acquire+release: write_bytes / syscw (wchar)",
              "fsyncs per acquire+release", "server requests per acquire+release", "znode writes per acquire+release",
              "lines of code"]
PROP_HEAD = ["", "kill -9 server while held: lock after restart", "fencing tokens after restart",
             "waiter served", "FIFO fraction (4 waiters)", "re-entry p50", "server requests while a waiter waits",
             "dead holder (SIGKILL) freed after", "held past 3 leases", "one server / member down"]


def _table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def _why_requests(b, p):
    """The server work per acquire+release of both, where counted: the usual reason."""
    mine, theirs = b.get("io") or {}, p.get("io") or {}
    parts = []
    if "requests_per_op" in mine and "requests_per_op" in theirs:
        parts.append("server requests per acquire+release %s vs %s" % (_num(mine["requests_per_op"]),
                                                                      _num(theirs["requests_per_op"])))
    if mine.get("fsyncs_per_op", 0) > 0.5 and theirs.get("fsyncs_per_op", 1) < 0.5:
        parts.append("dlock's lease rows are durable writes (%s fsyncs each), the peer's session lock is in memory"
                     % _num(mine["fsyncs_per_op"]))
    return ("; " + "; ".join(parts)) if parts else ""


def _why_slower(b, p):
    return "; why: dlock %s µs vs %s µs p50" % (_num(b["figures"]["p50_us"]), _num(p["uncontended"]["p50_us"])) + \
        _why_requests(b, p)


def targets(result):
    """Issue 13's targets, per dlock row with peers in its group: [(text, verdict, why)]."""
    out = []
    for b in result["backends"]:
        f = b.get("figures", {})
        group = "zookeeper" if b["group"] == "zookeeper3" else b["group"]
        if b["group"] == "zookeeper3":
            continue  # peers ran against the single server
        peers = [p for p in result["peers"] if p["group"] == group]
        if not peers or "p50_us" not in f:
            continue
        unc = [(p["uncontended"]["p50_us"], p) for p in peers if p.get("uncontended", {}).get("p50_us")]
        if unc:
            best, bp = min(unc, key=lambda x: x[0])
            floor = f.get("floor_p50_us")
            at_floor = floor and best <= 1.2 * floor
            speed = best / f["p50_us"]
            if at_floor:
                out.append(("dlock %s uncontended ≥ 1.5× best peer (%s)" % (b["id"], bp["id"]), "n/a",
                            "the peer is at the wire floor (%s µs vs floor %s µs); dlock %s×"
                            % (_num(best), _num(floor), _num(speed, digits=2))))
            else:
                out.append(("dlock %s uncontended ≥ 1.5× best peer (%s)" % (b["id"], bp["id"]),
                            "PASS" if speed >= 1.5 else "MISS",
                            "%s× faster" % _num(speed, digits=2) + ("" if speed >= 1.5 else _why_slower(b, bp))))
        for p in peers:
            if p["peer"].startswith("tooz") and p.get("uncontended", {}).get("p50_us"):
                s = p["uncontended"]["p50_us"] / f["p50_us"]
                out.append(("dlock %s ≥ 5× %s" % (b["id"], p["id"]), "PASS" if s >= 5 else "MISS",
                            "%s× faster" % _num(s, digits=2) + ("" if s >= 5 else _why_slower(b, p))))
        for p in peers:
            c = p.get("contended", {})
            if "handoffs_per_s" in c and "handoffs_per_s" in f:
                ok = f["handoffs_per_s"] > c["handoffs_per_s"]
                why = ""
                if not ok and c.get("handoff_p50_us") and f.get("handoff_p50_us"):
                    why = "; why: a hand-off takes dlock %s µs (p50), %s µs" % (_num(f["handoff_p50_us"]), _num(c["handoff_p50_us"]))
                    why += _why_requests(b, p)
                out.append(("dlock %s contended ahead of %s" % (b["id"], p["id"]), "PASS" if ok else "MISS",
                            "%s vs %s hand-offs/s" % (_num(f["handoffs_per_s"], digits=0),
                                                      _num(c["handoffs_per_s"], digits=0)) + why))
    return out


def markdown(result, svgs):
    r = result
    kind = "quick run (CI: checks every row is produced, timings not judged)" if r["quick"] else "full run"
    out = ["# dlock backend comparison, %s (%s)\n" % (r["started_utc"], kind),
           "Produced by `bench/compare.sh%s` in %s s on %d CPUs. Machine load (1/5/15 min) before: %s, after: %s%s.\n"
           % (" --quick" if r["quick"] else "", _num(r["seconds"], digits=0), r["nproc"],
              " ".join(r["loadavg_before"]), " ".join(r["loadavg_after"]),
              " — other jobs were running: compare ratios within this run, not absolute figures" if
              float(r["loadavg_before"][0]) > 0.5 * r["nproc"] else ""),
           "Every figure is measured in this run; a cell in parentheses says why there is none. "
           "Servers are private instances started by scripts/servers.sh on loopback. Dead-holder, "
           "renewal and crash cells use a %d s lease / session timeout (they scale with it). "
           "Definitions: bench/README.md, \"Backend comparison\".\n" % r["lease_s"],
           "## Speed and IO\n",
           _table(SPEED_HEAD, [speed_row(r, k, x) for k, x in ordered(r)]),
           "\n## The five properties, and what a server crash does\n",
           _table(PROP_HEAD, [property_row(r, k, x) for k, x in ordered(r) if k == "dlock" or x["group"] != "zookeeper3"]),
           "\n## Targets (issue 13; ratios within this run)\n"]
    for text, verdict, why in r["targets"]:
        out.append("- %s: **%s** — %s" % (text, verdict, why))
    if not r["targets"]:
        out.append("- (no dlock row had peers to compare with)")
    if r["failures"]:
        out.append("\n## Measurements that failed\n")
        out += ["- " + f for f in r["failures"]]
    if svgs:
        out.append("\n## Plots\n")
        out += ["![%s](%s)" % (s, s) for s in svgs]
    out.append("\nLines of code: bench/compare/examples/ (the same job for every library: take lock `job`, "
               "waiting at most 10 s, run the work, release; non-blank, non-comment lines).\n")
    return "\n".join(out) + "\n"


def plots(result, base):
    """Two SVG bar charts (log scale): uncontended p50 and hand-offs/s. gnuplot (gnuplot-nox)."""
    gp = shutil.which("gnuplot")
    if not gp:
        return []
    made = []
    for suffix, title, pick in (
        ("uncontended", "uncontended acquire + release p50 (µs, log scale; lower is better)",
         lambda k, x: (x["figures"].get("p50_us") if k == "dlock" else x.get("uncontended", {}).get("p50_us"))),
        ("handoffs", "contended hand-offs per second, 4 processes (log scale; higher is better)",
         lambda k, x: (x["figures"].get("handoffs_per_s") if k == "dlock" else x.get("contended", {}).get("handoffs_per_s"))),
    ):
        data = [(("dlock " + x["id"]) if k == "dlock" else x["id"], pick(k, x)) for k, x in ordered(result)]
        data = [(n, v) for n, v in data if v]
        if not data:
            continue
        dat = base + "-" + suffix + ".dat"
        with open(dat, "w") as f:
            for i, (n, v) in enumerate(data):
                f.write('%d "%s" %g\n' % (i, n, v))
        svg = base + "-" + suffix + ".svg"
        script = "\n".join([
            "set terminal svg size 900,%d dynamic font 'sans,11'" % (80 + 22 * len(data)),
            "set output '%s'" % svg, "set title '%s'" % title, "set logscale x", "set grid xtics",
            "set yrange [-1:%d]" % len(data), "set ytics nomirror", "set style fill solid 0.6", "unset key",
            # Bars from a common base below the smallest value (log scale: no zero).
            "plot '%s' using 3:1:(%g):3:($1-0.35):($1+0.35):ytic(2) with boxxyerror" % (dat, min(v for _, v in data) / 3),
        ])
        try:
            subprocess.run([gp], input=script, text=True, check=True, timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            made.append(svg)
        except (subprocess.SubprocessError, OSError):
            pass
        os.unlink(dat)
    return made


def write_all(result, out_dir, stamp=None):
    os.makedirs(out_dir, exist_ok=True)
    stamp = stamp or time.strftime("%Y-%m-%d", time.gmtime()) + ("-quick" if result["quick"] else "")
    base = os.path.join(out_dir, stamp)
    for b in result["backends"]:
        b["figures"] = dlock_figures(b)
        b["loc"] = loc(DLOCK_EXAMPLE)
    for p in result["peers"]:
        p["loc"] = loc(p["example"])
    result["targets"] = targets(result)
    slim = dict(result, backends=[dict({k: v for k, v in b.items() if k != "bench"}, bench_rows=_bench_rows(b))
                                  for b in result["backends"]])
    with open(base + ".json", "w") as f:
        json.dump(slim, f, indent=1, default=str)
    svgs = plots(result, base)
    with open(base + ".md", "w") as f:
        f.write(markdown(result, [os.path.basename(s) for s in svgs]))
    return [base + ".md", base + ".json"] + svgs


def missing_rows(result):
    """Rows without their first figure (CI's check: every row is produced)."""
    missing = [b["id"] for b in result["backends"] if "p50_us" not in b.get("figures", {})]
    missing += [p["id"] for p in result["peers"]
                if not p.get("uncontended", {}).get("p50_us") and not p.get("uncontended", {}).get("why", "").startswith(("not installed", "not run in --quick"))]
    return missing
