#!/usr/bin/env python3
"""Run every indexerd benchmark side by side with Recoll and print one table (issue 7).

  bench/run_all.py            full run: docs-fs (5,414 files) x 3 reps, live (50 edits),
                              scale 10k/50k/200k (Recoll up to --recoll-scale-max)
  bench/run_all.py --quick    every 20th docs-fs file up to 64 KiB (~230 files), 10 live edits,
                              scale 2k only (under two minutes end to end)

What it does, in order:
  1. installs what is missing (apt-get install -y python3-doc recollcmd; says so);
  2. builds the corpus with bench/build_corpus.sh (full run: always; --quick: only if missing);
  3. local trees: per repetition, indexerd and Recoll alternate (the order flips each rep):
     first index from empty (wall, peak RSS of the whole process tree, size on disk),
     re-index with nothing changed (3 times), re-index after appending a unique token to 1% of
     the files (and both must find exactly those files), the 20 queries of bench/queries.txt
     as processes (`indexerd ctl search` vs `recollq`, alternating per query); indexerd's
     query alone in-process; the bare os.scandir+stat floor;
  4. live: bench/bench_live.py (edit-to-searchable in the running daemon) and Recoll's real-time
     monitor (`recollindex -m`, polled with recollq), monixinterval = 1 and (full run) default;
  4b. http: bench/bench_http.py (`ctl search` with the daemon up vs recollq; the search page
     under 20 clients while the daemon indexes edits);
  5. scale: bench/gen_corpus.py trees (fixed seed), first index and unchanged re-scan;
  6. web: if bench/bench_web.py exists, runs it and adds its rows (see bench/README.md);
  7. prints the table, writes bench/out/run_all-<time>.{json,md}.
Ratios are indexerd/Recoll per repetition (same run, alternating), then the median.
Recoll is configured as in the peer harness: noaspell = 1, textunknownasplain = 1, else default.
"""
from __future__ import annotations

import argparse, json, os, platform, random, shutil, signal, statistics, subprocess, sys, tempfile, time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (HERE, REPO, PY, Indexerd, Recoll, append_token, median, p95, pick,  # noqa: E402
                      rand_word, restore, walk_floor, warm)

T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- formatting

def fs(x):
    if x is None:
        return "n/a"
    if x == float("inf"):
        return "> cap"
    return f"{x * 1e3:.0f} ms" if x < 0.1 else f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def fmb(x):
    return "n/a" if x is None else f"{x:.0f} MB" if x >= 10 else f"{x:.1f} MB"


class Table:
    def __init__(self):
        self.rows = []

    def add(self, metric, ix, rc, ratio=None, target=None, limit=None, met=None):
        r = "" if ratio is None else f"{ratio:.2f}x"
        if met is None and limit is not None and ratio is not None:
            met = ratio <= limit
        m = "" if met is None else ("yes" if met else "**NO**")
        self.rows.append([metric, ix, rc, r, target or "", m])

    def add_raw(self, row):
        self.rows.append([str(c) for c in (list(row) + [""] * 6)[:6]])

    def render(self) -> str:
        head = ["metric", "indexerd", "Recoll", "ratio", "target", "met?"]
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(out)


def ratio_of(pairs):
    rs = [a / b for a, b in pairs if a is not None and b]
    return statistics.median(rs) if rs else None


# ---------------------------------------------------------------- setup

def ensure_packages(need_recoll=True):
    missing = [p for p in (["python3-doc"] + (["recollcmd"] if need_recoll else []))
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        log(f"installing missing Debian packages: {' '.join(missing)} (apt-get install -y)")
        subprocess.run(["apt-get", "update", "-q"], check=False)
        # another job's apt-get may hold the dpkg lock: wait for it instead of failing
        subprocess.run(["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=900", *missing], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    else:
        log("packages present: python3-doc, recollcmd")


def make_subset(src: str, dst: str, every: int, max_bytes: int = 65536) -> int:
    files = sorted(os.path.join(r, f) for r, _, fs_ in os.walk(src) for f in fs_)
    chosen = [f for f in files[::every] if os.path.getsize(f) <= max_bytes]
    marker = dst.rstrip("/") + ".done"
    if os.path.isdir(dst) and os.path.exists(marker) and Path(marker).read_text() == f"{src} {every} {len(chosen)}":
        return len(chosen)
    shutil.rmtree(dst, ignore_errors=True)
    for f in chosen:
        out = os.path.join(dst, os.path.relpath(f, src))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copy2(f, out)
    for r, ds, _ in os.walk(dst, topdown=False):
        for d in ds:
            os.utime(os.path.join(r, d), (1704067200, 1704067200))
    Path(marker).write_text(f"{src} {every} {len(chosen)}")
    return len(chosen)


def machine_info() -> dict:
    mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    rv = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "recollcmd"], capture_output=True, text=True).stdout
    return {"nproc": os.cpu_count(), "ram_gib": round(mem / 1024 / 1024, 1), "kernel": platform.release(),
            "python": platform.python_version(), "recoll": rv or "n/a",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg())}


# ---------------------------------------------------------------- local trees

def bench_local(tree: str, work: str, reps: int, queries: list[str], tab: Table, res: dict):
    ix, rc = Indexerd(tree, work), Recoll(tree, work)
    nfiles = sum(len(f) for _, _, f in os.walk(tree))
    log(f"local: {tree} ({nfiles} files), {reps} reps, indexerd and Recoll alternating")
    warm(tree)
    floor = walk_floor(tree)
    R = {e: {k: [] for k in ("full_wall", "full_rss", "full_one", "full_cpu", "size", "index", "store", "docs", "nochange",
                             "nochange_pass", "onepct", "onepct_found", "q_med", "q_all")} for e in ("ix", "rc")}
    engines = {"ix": ix, "rc": rc}
    changed = None
    for r in range(reps):
        order = ["ix", "rc"] if r % 2 == 0 else ["rc", "ix"]
        for k in order:
            e = engines[k]
            e.fresh()
            m = e.index()
            s = e.sizes()
            R[k]["full_wall"].append(m["wall"]); R[k]["full_rss"].append(m["peak_rss_mb"]); R[k]["full_one"].append(m["maxrss_one_mb"]); R[k]["full_cpu"].append(m["cpu"])
            R[k]["size"].append(s["total"] / 1e6); R[k]["index"].append(s["index"] / 1e6); R[k]["store"].append(s["store"] / 1e6)
            R[k]["docs"].append(m.get("indexed"))
            log(f"  rep {r + 1} {e.name:8s} first index {m['wall']:.1f} s, peak tree memory {m['peak_rss_mb']:.0f} MB, max RSS of one process "
                f"{m['maxrss_one_mb']:.0f} MB, {s['total'] / 1e6:.0f} MB on disk, {m.get('indexed')} docs")
        nc = {"ix": [], "rc": [], "ixp": []}
        for _ in range(3):
            for k in order:
                m = engines[k].index()
                if k == "ix":
                    assert m["indexed"] == 0, f"unchanged re-index indexed {m['indexed']}"
                    nc["ixp"].append(m["pass_s"])
                nc[k].append(m["wall"])
        R["ix"]["nochange"].append(median(nc["ix"])); R["rc"]["nochange"].append(median(nc["rc"]))
        R["ix"]["nochange_pass"].append(median(nc["ixp"]))
        log(f"  rep {r + 1} unchanged re-index: indexerd {median(nc['ix']):.3f} s (pass {median(nc['ixp']):.4f} s), "
            f"Recoll {median(nc['rc']):.3f} s")
        paths = pick(tree, 1)
        changed = len(paths)
        token = rand_word(random.Random(1000 + r), "benchmod")
        saved = append_token(paths, token)
        try:
            for k in order:
                e = engines[k]
                m = e.index()
                found = e.hits_paths(token)
                exact = found == set(paths)
                R[k]["onepct"].append(m["wall"])
                R[k]["onepct_found"].append((len(found & set(paths)), len(found), exact))
                log(f"  rep {r + 1} {e.name:8s} 1% ({len(paths)} files) re-index {m['wall']:.3f} s; token in "
                    f"{len(found)} docs, exactly the edited files: {exact}")
        finally:
            restore(saved)
            for k in order:
                engines[k].index()
        qt = {"ix": [], "rc": []}
        for i, q in enumerate(queries):
            for k in (order if i % 2 == 0 else order[::-1]):
                qt[k].append(engines[k].query(q))
        for k in ("ix", "rc"):
            R[k]["q_med"].append(median(qt[k])); R[k]["q_all"] += qt[k]
        log(f"  rep {r + 1} queries (process): indexerd p50 {median(qt['ix']) * 1e3:.0f} ms, Recoll p50 {median(qt['rc']) * 1e3:.0f} ms")
    # query alone, in-process (indexerd only; recollq is always a process)
    sys.path.insert(0, str(REPO))
    from indexerd.index import open_index
    w = open_index(ix.state, create=False)
    alone = []
    for _ in range(3):
        for q in queries:
            t = time.perf_counter(); w.search(q, limit=20); alone.append(time.perf_counter() - t)
    w.close()
    res["local"] = {"tree": tree, "files": nfiles, "floor_s": floor, "reps": reps, "raw": R, "query_alone": alone,
                    "changed_1pct": changed}

    def pair(key):
        return list(zip(R["ix"][key], R["rc"][key]))

    def cell(key, f):
        xs = R["ix"][key], R["rc"][key]
        return f(median(xs[0])), f(median(xs[1]))

    a, b = cell("full_wall", fs)
    tab.add(f"first index, wall (median of {reps})", a, b, ratio_of(pair("full_wall")), "≤ 1.0x", 1.0)
    a, b = cell("full_rss", fmb)
    tab.add("first index, peak memory of the process tree (root RSS + children USS)", a, b, ratio_of(pair("full_rss")), "≤ 0.5x", 0.5)
    a, b = cell("full_one", fmb)
    tab.add("first index, max RSS of the largest process (rusage)", a, b, ratio_of(pair("full_one")), "≤ 0.5x", 0.5)
    a = f"{fmb(median(R['ix']['size']))} (index {fmb(median(R['ix']['index']))} + store {fmb(median(R['ix']['store']))})"
    tab.add("index size on disk", a, fmb(median(R["rc"]["size"])), ratio_of(pair("size")), "≤ 0.5x", 0.5)
    a, b = cell("full_cpu", fs)
    tab.add("first index, cpu (user+sys)", a, b, ratio_of(pair("full_cpu")))
    tab.add("documents indexed", str(R["ix"]["docs"][-1]), str(R["rc"]["docs"][-1]))
    a, b = cell("nochange", fs)
    tab.add("re-index, nothing changed (whole command)", a, b, ratio_of(pair("nochange")), "≤ 1.0x", 1.0)
    tab.add("  the same, pass inside indexerd vs bare scandir+stat floor", fs(median(R["ix"]["nochange_pass"])),
            f"floor {fs(floor)}", median(R["ix"]["nochange_pass"]) / floor)
    a, b = cell("onepct", fs)
    tab.add(f"re-index after 1% edited ({changed} files)", a, b, ratio_of(pair("onepct")), "≤ 1.0x", 1.0)
    fd = lambda k: ", ".join(f"{x}/{changed}" + ("" if ex else f" (+{n - x} other)") for x, n, ex in R[k]["onepct_found"])
    ok = all(ex for k in ("ix", "rc") for *_, ex in R[k]["onepct_found"])
    tab.add("  token found in exactly the edited files (per rep)", fd("ix"), fd("rc"), None, "both exact", met=ok)
    qa, qb = R["ix"]["q_all"], R["rc"]["q_all"]
    tab.add("query p50, one process per query (20 queries)", fs(median(qa)), fs(median(qb)), ratio_of(pair("q_med")))
    tab.add("query p95, one process per query", fs(p95(qa)), fs(p95(qb)), p95(qa) / p95(qb))
    tab.add("query p50 / p95, in-process (query alone)", f"{fs(median(alone))} / {fs(p95(alone))}",
            "(recollq only runs as a process)")


# ---------------------------------------------------------------- live

def recoll_monitor(rc: Recoll, edits: int, monix: int | None, cap: float, seed: int = 11) -> dict:
    """Edit-to-searchable with `recollindex -m`: append a fresh word to a file, poll recollq."""
    rc.write_conf(f"monixinterval = {monix}\n" if monix is not None else "")
    subprocess.run(["recollindex", "-c", rc.conf], cwd=rc.conf, capture_output=True)   # up to date first
    logf = open(os.path.join(rc.conf, "monitor.out"), "w")
    p = subprocess.Popen(["recollindex", "-c", rc.conf, "-m", "-D", "-x", "-C", "-n", "-w", "0"], cwd=rc.conf,
                         stdout=logf, stderr=subprocess.STDOUT)
    saved, lat = {}, []
    try:
        for _ in range(100):
            if p.poll() is not None or rc.idxstatus().get("hasmonitor") == "1":
                break
            time.sleep(0.1)
        if p.poll() is not None:
            tail = Path(rc.conf, "monitor.out").read_text()[-500:] + Path(rc.conf, "recoll.log").read_text()[-500:] \
                if Path(rc.conf, "recoll.log").exists() else ""
            return {"error": f"recollindex -m exited with {p.returncode} before monitoring: {tail.strip()}"}
        time.sleep(2)
        rng = random.Random(seed)
        files = sorted(os.path.join(r, f) for r, _, fs_ in os.walk(rc.tree) for f in fs_ if f.endswith(".txt"))
        for i in range(edits):
            word = rand_word(rng, "recmon")
            f = rng.choice(files)
            if f not in saved:
                st = os.stat(f); saved[f] = (f, st.st_size, st.st_atime_ns, st.st_mtime_ns)
            t0 = time.perf_counter()
            with open(f, "a") as fh:
                fh.write(f"\n{word}\n")
            while True:
                if rc.count(word) > 0:
                    lat.append(time.perf_counter() - t0); break
                if time.perf_counter() - t0 > cap:
                    lat.append(float("inf")); break
                if p.poll() is not None:
                    return {"error": f"recollindex -m died (exit {p.returncode}) during the test", "latencies": lat}
                time.sleep(0.01)
            time.sleep(0.05)
        hwm = next((int(l.split()[1]) / 1024 for l in open(f"/proc/{p.pid}/status") if l.startswith("VmHWM")), None)
        return {"edits": len(lat), "latencies": lat, "median": median(lat), "p95": p95(lat), "max": max(lat),
                "monitor_peak_rss_mb": hwm, "monixinterval": monix if monix is not None else "default (30)"}
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill(); p.wait()
        logf.close()
        restore(list(saved.values()))
        rc.write_conf()
        subprocess.run(["recollindex", "-c", rc.conf], cwd=rc.conf, capture_output=True)


def bench_live(tree: str, work: str, edits: int, default_monitor: bool, tab: Table, res: dict):
    log(f"live: bench/bench_live.py {tree} --edits {edits}")
    p = subprocess.run([PY, str(HERE / "bench_live.py"), tree, "--edits", str(edits)], capture_output=True, text=True,
                       cwd=str(REPO), env=dict(os.environ, PYTHONPATH=str(REPO)))
    ixl = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-1000:]}
    log(f"  indexerd: {ixl}")
    rc = Recoll(tree, work)
    if not os.path.exists(os.path.join(rc.conf, "xapiandb")):
        rc.fresh(); rc.index()
    log(f"live: recollindex -m, monixinterval = 1, {edits} edits")
    rl = recoll_monitor(rc, edits, 1, cap=30)
    log(f"  Recoll monixinterval=1: { {k: v for k, v in rl.items() if k != 'latencies'} }")
    rd = None
    if default_monitor:
        log("live: recollindex -m, default monixinterval (30 s), 2 edits, cap 45 s")
        rd = recoll_monitor(rc, 2, None, cap=45, seed=12)
        log(f"  Recoll default: { {k: v for k, v in rd.items() if k != 'latencies'} }")
    res["live"] = {"indexerd": ixl, "recoll_monix1": rl, "recoll_default": rd}
    im, ip = ixl.get("latency_median_s"), ixl.get("latency_p95_s")
    if "error" in rl:
        rtxt = f"not measured: {rl['error']}"
        tab.add(f"edit-to-searchable median ({edits} edits, daemon)", fs(im), rtxt, None, "≤ 0.5 s",
                met=None if im is None else im <= 0.5)
    else:
        tab.add(f"edit-to-searchable median ({edits} edits; Recoll: recollindex -m, monixinterval = 1)", fs(im),
                fs(rl["median"]), im / rl["median"] if im and rl["median"] else None, "≤ 0.5 s (absolute)",
                met=None if im is None else im <= 0.5)
        tab.add("edit-to-searchable p95", fs(ip), fs(rl["p95"]), ip / rl["p95"] if ip and rl["p95"] else None)
        tab.add("edit-to-searchable max", fs(ixl.get("latency_max_s")), fs(rl["max"]))
    if rd is not None:
        tab.add("edit-to-searchable, Recoll with default monixinterval (2 edits)", "",
                rd.get("error") or ", ".join(fs(x) for x in rd["latencies"]))
    tab.add("daemon / monitor RSS while watching", f"{fmb(ixl.get('daemon_rss_mb'))} (peak {fmb(ixl.get('daemon_peak_rss_mb'))})",
            fmb(rl.get("monitor_peak_rss_mb")) + " (peak)" if "error" not in rl else "n/a")


# ---------------------------------------------------------------- scale

#: Queries for the generated trees (their pseudo-word vocabulary, bench/gen_corpus.py): the most
#: frequent words, rarer ones, a phrase, OR, NOT, a prefix and a title line's words.
SCALE_QUERIES = ["difo", "refobo masufe", '"difo masufe"', "fibaz OR hupa", "zulun", "ref*", "difo -refobo",
                 "document 1713", "tekivoko", "cejah wapopo", "nudoki polubo bukovukik", "zakotacof"]


def query_alone(state: str, queries: list[str], reps: int = 3) -> list[float]:
    """Seconds per query (limit 20) in this process on the index of ``state`` (any engine),
    after one warm-up pass."""
    sys.path.insert(0, str(REPO))
    from indexerd.index import open_index

    ix = open_index(state, create=False)
    try:
        for q in queries:
            ix.search(q, limit=20)
        out = []
        for _ in range(reps):
            for q in queries:
                t = time.perf_counter(); ix.search(q, limit=20); out.append(time.perf_counter() - t)
        return out
    finally:
        ix.close()


#: rounds of the unchanged re-scan in the scale step (each peer once a round)
NOCHANGE_ROUNDS = 10


def installed_script(work: str) -> str:
    """The ``indexerd`` console script laid out as ``pip install`` (not ``-e``) lays it out
    (:func:`bench_http.installed_layout`), made once per run."""
    from bench_http import installed_layout

    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = installed_layout(work)
    return _INSTALLED


_INSTALLED: str | None = None


def bench_scale(sizes: list[int], data: str, work: str, recoll_max: int, tab: Table, res: dict,
                engines_wanted: tuple[str, ...] = ("whoosh", "tantivy")):
    res["scale"] = {}
    for j, n in enumerate(sizes):
        tree = os.path.join(data, f"scale-{n}")
        log(f"scale: generating {n} files (bench/gen_corpus.py, seed 1)")
        g = subprocess.run([PY, str(HERE / "gen_corpus.py"), tree, str(n), "--seed", "1"], capture_output=True,
                           text=True, check=True)
        info = json.loads(g.stdout)
        warm(tree)
        floor = walk_floor(tree, 3)
        sw = os.path.join(work, f"scale-{n}")
        engines = {("ix" if e == "whoosh" else e): Indexerd(tree, sw, engine=e) for e in engines_wanted}
        if n <= recoll_max:
            engines["rc"] = Recoll(tree, sw)
        order = list(engines) if j % 2 == 0 else list(engines)[::-1]
        out = {"files": n, "bytes": info["bytes"], "floor_s": floor}
        for k in order:
            e = engines[k]
            e.fresh()
            m = e.index()
            s = e.sizes()
            out[k] = {"wall": m["wall"], "rss": m["peak_rss_mb"], "rss_one": m["maxrss_one_mb"], "cpu": m["cpu"], "docs": m.get("indexed"),
                      "size": s["total"], "index": s["index"], "store": s["store"]}
            if k != "rc":
                out[k]["query_alone"] = query_alone(e.state, SCALE_QUERIES)
            log(f"  {n} {e.name:8s} first index {m['wall']:.1f} s ({n / m['wall']:.0f} files/s), tree memory {m['peak_rss_mb']:.0f} MB (one process max RSS "
                f"{m['maxrss_one_mb']:.0f} MB), {s['total'] / 1e6:.0f} MB on disk")
        # the unchanged re-scan, whole command: the peers in turn, the order reversed every
        # round, indexerd's console script laid out as installed (no editable-install
        # finder), timed unpolled
        for e in engines.values():
            if isinstance(e, Indexerd):
                e.command = [installed_script(work)]
        nc: dict[str, list[dict]] = {k: [] for k in engines}
        for rnd in range(NOCHANGE_ROUNDS):
            for k in (order if rnd % 2 == 0 else order[::-1]):
                m = engines[k].index(memory=False)
                if k != "rc":
                    assert m["indexed"] == 0, f"unchanged re-index indexed {m['indexed']}"
                nc[k].append(m)
        for k in order:
            out[k]["nochange"] = median(x["wall"] for x in nc[k])
            out[k]["nochange_pass"] = median(x.get("pass_s") for x in nc[k]) if k != "rc" else None
            log(f"  {n} {engines[k].name:8s} unchanged {out[k]['nochange']:.3f} s (median of {NOCHANGE_ROUNDS})")
        shutil.rmtree(sw, ignore_errors=True)
        res["scale"][n] = out
        rcr = out.get("rc")
        mb = info["bytes"] / 1e6
        for k in engines:
            if k == "rc":
                continue
            ix = out[k]
            eng = "" if k == "ix" else f" ({engines[k].engine})"
            lab = f"scale {n // 1000}k files ({mb:.0f} MB){eng}"
            wall_target, size_target = (1.0, 0.5) if k == "ix" else (0.5, 0.5)
            tab.add(f"{lab}: first index, wall", f"{fs(ix['wall'])} ({n / ix['wall']:.0f} files/s)",
                    f"{fs(rcr['wall'])} ({n / rcr['wall']:.0f} files/s)" if rcr else "not run",
                    ix["wall"] / rcr["wall"] if rcr else None, f"≤ {wall_target}x" if rcr else None,
                    wall_target if rcr else None)
            tab.add(f"{lab}: first index, peak tree memory", fmb(ix["rss"]), fmb(rcr["rss"]) if rcr else "not run",
                    ix["rss"] / rcr["rss"] if rcr else None, "≤ 0.5x" if rcr else None, 0.5 if rcr else None)
            tab.add(f"{lab}: unchanged re-scan (whole command)",
                    f"{fs(ix['nochange'])} (pass {fs(ix['nochange_pass'])}, floor {fs(floor)})",
                    fs(rcr["nochange"]) if rcr else "not run", ix["nochange"] / rcr["nochange"] if rcr else None,
                    "≤ 1.0x" if rcr else None, 1.0 if rcr else None)
            tab.add(f"{lab}: bytes on disk per document",
                    f"{ix['size'] / n:,.0f} (index {ix['index'] / n:,.0f} + store {ix['store'] / n:,.0f})",
                    f"{rcr['size'] / n:,.0f}" if rcr else "not run", ix["size"] / rcr["size"] if rcr else None,
                    f"≤ {size_target}x" if rcr else None, size_target if rcr else None)
            qa = ix["query_alone"]
            met = median(qa) <= 0.005 if k != "ix" else None
            tab.add(f"{lab}: query p50 / p95, in-process (query alone, {len(SCALE_QUERIES)} queries)",
                    f"{fs(median(qa))} / {fs(p95(qa))}", "(recollq only runs as a process)", None,
                    "≤ 5 ms (absolute)" if k != "ix" else None, met=met)


# ---------------------------------------------------------------- web (bench/bench_web.py, written separately)

def bench_web(quick: bool, tab: Table, res: dict):
    script = HERE / "bench_web.py"
    if not script.exists():
        log("web: bench/bench_web.py not present, skipped")
        tab.add_raw(["web crawl vs wget/HTTrack", "bench/bench_web.py not present", "", "", "", ""])
        return
    fd, rows_json = tempfile.mkstemp(suffix=".json"); os.close(fd)
    extra = ["--quick"] if quick else []
    log(f"web: {script} --rows-json {rows_json} {' '.join(extra)}")
    p = subprocess.run([PY, str(script), "--rows-json", rows_json, *extra], capture_output=True, text=True,
                       cwd=str(REPO), env=dict(os.environ, PYTHONPATH=str(REPO)))
    rows = None
    if p.returncode == 0:
        try:
            rows = json.loads(Path(rows_json).read_text())
        except (OSError, ValueError):
            rows = None
    if rows is None:   # fall back: run it plainly and take the markdown table rows it prints
        p = subprocess.run([PY, str(script), *extra], capture_output=True, text=True, cwd=str(REPO),
                           env=dict(os.environ, PYTHONPATH=str(REPO)))
        rows = []
        for line in p.stdout.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.lstrip().startswith("|") and not set(line) <= set("|-: ") and cells[0].lower() != "metric":
                rows.append(cells)
        if p.returncode != 0:
            rows.append(["web benchmark", f"bench_web.py exited {p.returncode}: {p.stderr.strip()[-200:]}"])
    os.remove(rows_json)
    res["web"] = rows
    for r in rows:
        tab.add_raw(r)


# ---------------------------------------------------------------- queries through the daemon

def bench_http(tree: str, quick: bool, tab: Table, res: dict):
    """bench/bench_http.py: `ctl search` with the daemon up vs recollq; the page under load."""
    args = ["--reps", "1" if quick else "3", "--seconds", "10" if quick else "30", "--clients", "20"]
    log(f"http: bench/bench_http.py {tree} {' '.join(args)}")
    p = subprocess.run([PY, str(HERE / "bench_http.py"), tree, *args], capture_output=True, text=True,
                       cwd=str(REPO), env=dict(os.environ, PYTHONPATH=str(REPO)))
    if p.returncode != 0:
        tab.add_raw(["queries through the daemon", f"bench_http.py exited {p.returncode}: {p.stderr.strip()[-200:]}",
                     "", "", "", ""])
        return
    r = json.loads(p.stdout)
    res["http"] = r
    up, down, pg = r["ctl_daemon_up"], r["ctl_daemon_down"], r["page"]
    tab.add("query p50, `ctl search` process with the daemon up vs recollq", fs(up["p50"]), fs(up["recollq_p50"]),
            up["ratio_p50"], "≤ 3.0x", 3.0)
    if "ctl_installed_daemon_up" in r:
        inst = r["ctl_installed_daemon_up"]
        tab.add("  the same, `indexerd ctl` laid out as installed (no editable finder)", fs(inst["p50"]),
                fs(inst["recollq_p50"]), inst["ratio_p50"], "≤ 3.0x", 3.0)
        tab.add("  `python -c pass` (the interpreter's bare start)", fs(r["python_startup_p50"]),
                fs(inst["recollq_p50"]), r["python_startup_p50"] / inst["recollq_p50"])
    tab.add("  the same with the daemon down (ctl opens the index)", fs(down["p50"]), fs(down["recollq_p50"]),
            down["ratio_p50"])
    tab.add(f"search page p50 / p95, {r['clients']} clients, {r['seconds']:.0f} s, edits every 0.25 s",
            f"{fs(pg['p50'])} / {fs(pg['p95'])}", "(no peer)", None, "no error",
            met=pg["errors"] == 0)
    tab.add("  requests, errors, requests/s", f"{pg['requests']}, {pg['errors']}, {pg['rps']:.0f}/s", "")
    tab.add("  edit-to-searchable p50 / p95 during it (via /api/search)",
            f"{fs(pg['edit_p50'])} / {fs(pg['edit_p95'])}", "", None, "p50 ≤ 0.5 s",
            met=pg["edit_p50"] is not None and pg["edit_p50"] <= 0.5)
    if pg.get("daemon_edit_p50") is not None:
        tab.add("  edit-to-searchable p50 / p95 during it (the daemon's histogram)",
                f"{fs(pg['daemon_edit_p50'])} / {fs(pg['daemon_edit_p95'])}", "", None, "p50 ≤ 0.5 s",
                met=pg["daemon_edit_p50"] <= 0.5)


# ---------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small run (~230 files, scale 2k only, 10 live edits; under two minutes)")
    ap.add_argument("--reps", type=int, help="repetitions of the local-tree comparison (default 3)")
    ap.add_argument("--scale", help="comma-separated scale sizes (default 10000,50000,200000; --quick 10000)")
    ap.add_argument("--recoll-scale-max", type=int, default=50000, help="run Recoll on scale sets up to this size")
    ap.add_argument("--edits", type=int, help="live edits (default 50; --quick 20)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: local,live,http,scale,web")
    ap.add_argument("--engines", default="whoosh,tantivy",
                    help="index engines measured on the scale trees (default whoosh,tantivy)")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/bench-data"))
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    reps = a.reps or 3
    sizes = [int(x) for x in (a.scale or ("2000" if a.quick else "10000,50000,200000")).split(",") if x]
    edits = a.edits or (10 if a.quick else 50)
    cmd = "bench/run_all.py " + " ".join(sys.argv[1:])
    mi = machine_info()
    print(f"# indexerd benchmarks: `{cmd.strip()}`\n\nmachine: {mi['nproc']} cpu, {mi['ram_gib']} GiB RAM, kernel "
          f"{mi['kernel']}, Python {mi['python']}, Recoll {mi['recoll']}; {mi['date']}, load {mi['loadavg']}\n", flush=True)
    ensure_packages()
    docs = os.path.join(a.data, "docs-fs")
    if not a.quick or not os.path.isdir(docs):
        log("building the corpus: bench/build_corpus.sh")
        subprocess.run([str(HERE / "build_corpus.sh")], check=True, env=dict(os.environ, BENCH_DATA=a.data))
    tree = docs
    if a.quick:
        n = make_subset(docs, os.path.join(a.data, "docs-quick"), 20)
        tree = os.path.join(a.data, "docs-quick")
        log(f"quick tree: every 20th file of docs-fs up to 64 KiB, {n} files")
    tree = os.path.realpath(tree)
    work = tempfile.mkdtemp(prefix="run-all-", dir=a.data)
    queries = [q for q in (HERE / "queries.txt").read_text().splitlines() if q.strip()]
    tab, res = Table(), {"command": cmd, "machine": mi, "tree": tree}
    try:
        if "local" not in skip:
            bench_local(tree, work, reps, queries, tab, res)
        if "live" not in skip:
            bench_live(tree, work, edits, not a.quick, tab, res)
        if "http" not in skip:
            bench_http(tree, a.quick, tab, res)
        if "scale" not in skip:
            bench_scale(sizes, a.data, work, a.recoll_scale_max, tab, res,
                        tuple(x for x in a.engines.split(",") if x))
        if "web" not in skip:
            bench_web(a.quick, tab, res)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["elapsed_s"] = time.perf_counter() - T0
    md = tab.render()
    foot = (f"\nratio = indexerd / Recoll, per repetition in the same run (alternating order), then the median; "
            f"tree {tree}; total time {res['elapsed_s'] / 60:.1f} min")
    print(md + "\n" + foot, flush=True)
    outdir = HERE / "out"; outdir.mkdir(exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    (outdir / f"run_all-{stamp}.json").write_text(json.dumps(res, indent=1, default=str))
    (outdir / f"run_all-{stamp}.md").write_text(f"`{cmd.strip()}`\n\n{json.dumps(mi)}\n\n{md}\n{foot}\n")


if __name__ == "__main__":
    main()
