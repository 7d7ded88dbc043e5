#!/usr/bin/env python3
"""Issue 31 (3): query times per engine and index size, and ``ctl search`` against ``recollq``.

  bench_queries.py inproc --state LABEL=STATE_DIR ... [--code NAME=REPO ...] [--pair LABEL=NAME ...]
                          [--facets] [--reps 2] [--rounds 3] [--limit 20]
  bench_queries.py ctl --config CFG --recoll RECOLL_CONF_DIR [--reps 3] [--limit 20] [--repo DIR]

inproc  each index (any engine, opened read-only with ``open_index``) in a child process of its
        own: the 12 queries of run_all.py's ``SCALE_QUERIES`` once as a warm-up, then ROUNDS
        rounds, each query timed alone (``search(q, limit=LIMIT)``, snippets included).  With
        several ``--code`` checkouts (e.g. ``before=/work/main after=.``) each index is measured
        with each (``PYTHONPATH``); the (index, code) runs alternate their order every
        repetition, REPS repetitions.  p50 and p95 (nearest rank, as benchlib.p95) over every
        single query time of a pair, and each query's median.  ``--pair``: only these
        (index, code) pairs, not every index with every code (an index only its own code
        reads).  ``--facets``: each round also times ``facets(q)`` (the counts per media type
        and source the daemon computes for every page) after the query, for the code whose
        ``SearchIndex`` has it, reported as its own row (``LABEL NAME facets``).
ctl     ``indexerd run -c CFG`` started from this checkout (or ``--repo``; its config must set
        ``control_socket``); once its start-up pass is over, each query of ``SCALE_QUERIES``
        through ``indexerd ctl -c CFG search Q --limit LIMIT`` (a process, laid out as installed:
        bench_http.installed_layout) and ``recollq -c CONF -n LIMIT Q``, alternating which goes
        first per query and repetition, after one warm-up of each.  p50/p95 of each, their ratio.
Progress goes to stderr; JSON to stdout and bench/out/queries-<time>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from run_all import SCALE_QUERIES  # noqa: E402

PY = sys.executable

CHILD = """
import json, sys, time
from indexerd.index import open_index
state, queries, rounds, limit = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ix = open_index(state, create=False)
import indexerd
assert indexerd.__file__.startswith(sys.argv[5]), indexerd.__file__
want_facets = sys.argv[6] == "1" and hasattr(ix, "facets")
hits = {q: len(ix.search(q, limit=limit)) for q in queries}
if want_facets:
    for q in queries:
        ix.facets(q)
out = {q: [] for q in queries}
fac = {q: [] for q in queries}
for _ in range(rounds):
    for q in queries:
        t = time.perf_counter(); ix.search(q, limit=limit); out[q].append(time.perf_counter() - t)
        if want_facets:
            t = time.perf_counter(); ix.facets(q); fac[q].append(time.perf_counter() - t)
ix.close()
print(json.dumps({"times": out, "hits": hits, "facets": fac if want_facets else None}))
"""


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def p95(xs: list[float]) -> float:
    """The nearest-rank 95th percentile (benchlib.p95)."""
    xs = sorted(xs)
    return xs[int(0.95 * (len(xs) - 1))]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def inproc(states: list[tuple[str, str]], codes: list[tuple[str, str]], reps: int, rounds: int,
           limit: int, only: list[tuple[str, str]] | None = None, facets: bool = False) -> dict:
    pairs = [(s, c) for s in states for c in codes if only is None or (s[0], c[0]) in only]
    if not pairs:
        raise SystemExit("no (index, code) pair left: see --pair")
    times: dict[str, dict[str, list[float]]] = {}
    hits: dict[str, dict] = {}
    for r in range(reps):
        for (label, state), (code, repo) in (pairs if r % 2 == 0 else pairs[::-1]):
            key = f"{label} {code}"
            env = {**os.environ, "PYTHONPATH": str(Path(repo).resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
            env.pop("INDEXERD_CONFIG", None)
            # cwd: ``python -c`` puts the working directory first on sys.path, before PYTHONPATH
            p = subprocess.run([PY, "-c", CHILD, state, json.dumps(SCALE_QUERIES), str(rounds), str(limit),
                                str(Path(repo).resolve()), "1" if facets else "0"], env=env, cwd=str(Path(repo).resolve()), capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"{key}: {p.stderr[-2000:]}")
            got = json.loads(p.stdout)
            per = times.setdefault(key, {q: [] for q in SCALE_QUERIES})
            for q, ts in got["times"].items():
                per[q] += ts
            hits[key] = got["hits"]
            flat = [t for ts in got["times"].values() for t in ts]
            log(f"rep {r + 1} {key}: p50 {statistics.median(flat) * 1e3:.1f} ms, p95 {p95(flat) * 1e3:.1f} ms "
                f"(load {load()})")
            if got.get("facets"):
                fper = times.setdefault(f"{key} facets", {q: [] for q in SCALE_QUERIES})
                for q, ts in got["facets"].items():
                    fper[q] += ts
                hits[f"{key} facets"] = got["hits"]
                flat = [t for ts in got["facets"].values() for t in ts]
                log(f"rep {r + 1} {key} facets: p50 {statistics.median(flat) * 1e3:.1f} ms, "
                    f"p95 {p95(flat) * 1e3:.1f} ms (load {load()})")
    out = {}
    for key, per in times.items():
        flat = [t for ts in per.values() for t in ts]
        out[key] = {"p50_ms": round(statistics.median(flat) * 1e3, 1), "p95_ms": round(p95(flat) * 1e3, 1),
                    "n": len(flat), "per_query_median_ms": {q: round(statistics.median(ts) * 1e3, 1) for q, ts in per.items()},
                    "hits": hits[key]}
    return out


def installed_ctl(work: str) -> str:
    from bench_http import installed_layout

    return installed_layout(work)


FAILED: list[dict] = []


def timed(cmd: list[str], env: dict) -> float:
    """Seconds ``cmd`` took; a failure (``ctl search`` past its query timeout) is kept in
    :data:`FAILED` and its time counted all the same."""
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        FAILED.append({"cmd": cmd[-4:], "exit": p.returncode, "seconds": round(dt, 3), "stderr": p.stderr[-300:]})
        log(f"failed after {dt:.2f} s: {cmd[-4:]}: {p.stderr.strip()[-200:]}")
    return dt


def ctl(config: str, recoll_conf: str, reps: int, limit: int, repo: Path) -> dict:
    # byte-compiled as an install is (with PYTHONDONTWRITEBYTECODE=1 every `ctl` start compiles)
    env = {k: v for k, v in os.environ.items() if k not in ("INDEXERD_CONFIG", "STATE_DIRECTORY",
                                                            "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(repo)
    subprocess.run([PY, "-m", "compileall", "-q", str(repo / "indexerd")], check=True, capture_output=True)
    work = tempfile.mkdtemp(prefix="bench-queries-")
    daemon = subprocess.Popen([PY, "-m", "indexerd.cli.main", "run", "-c", config], env=env, cwd=str(repo),
                              stdout=open(os.path.join(work, "daemon.log"), "ab"), stderr=subprocess.STDOUT)
    try:
        script = installed_ctl(work)
        deadline = time.monotonic() + 900
        t0 = time.monotonic()
        while True:
            p = subprocess.run([script, "ctl", "-c", config, "status", "--json"], env=env, capture_output=True, text=True)
            if p.returncode == 0:
                src = json.loads(p.stdout)["sources"]
                if all((s.get("last_run") or {}).get("finished") for s in src.values()):
                    break
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daemon not ready (exit {daemon.poll()}): see {work}/daemon.log")
            time.sleep(0.5)
        log(f"daemon up, start-up pass over after {time.monotonic() - t0:.1f} s")
        ix_cmd = lambda q: [script, "ctl", "-c", config, "search", q, "--limit", str(limit)]  # noqa: E731
        rc_cmd = lambda q: ["recollq", "-c", recoll_conf, "-n", str(limit), q]  # noqa: E731
        for q in SCALE_QUERIES:  # warm-up: page cache, the daemon's searchers
            timed(ix_cmd(q), env)
            timed(rc_cmd(q), env)
        ours: list[float] = []
        theirs: list[float] = []
        for r in range(reps):
            for i, q in enumerate(SCALE_QUERIES):
                if (i + r) % 2 == 0:
                    ours.append(timed(ix_cmd(q), env))
                    theirs.append(timed(rc_cmd(q), env))
                else:
                    theirs.append(timed(rc_cmd(q), env))
                    ours.append(timed(ix_cmd(q), env))
            log(f"rep {r + 1}: ctl p50 {statistics.median(ours) * 1e3:.1f} ms, recollq p50 "
                f"{statistics.median(theirs) * 1e3:.1f} ms (load {load()})")
        res = {"ctl_p50_ms": round(statistics.median(ours) * 1e3, 1), "ctl_p95_ms": round(p95(ours) * 1e3, 1),
               "recollq_p50_ms": round(statistics.median(theirs) * 1e3, 1),
               "recollq_p95_ms": round(p95(theirs) * 1e3, 1), "n": len(ours), "failed": FAILED}
        res["p50_ratio"] = round(res["ctl_p50_ms"] / res["recollq_p50_ms"], 2)
        return res
    finally:
        daemon.terminate()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        shutil.rmtree(work, ignore_errors=True)


def pairs_arg(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for it in items:
        label, _, value = it.partition("=")
        if not value:
            raise SystemExit(f"expected LABEL=VALUE, got {it!r}")
        out.append((label, value))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("inproc")
    a.add_argument("--state", action="append", required=True)
    a.add_argument("--code", action="append", default=None)
    a.add_argument("--pair", action="append", default=None, help="LABEL=NAME: only these (index, code) pairs")
    a.add_argument("--facets", action="store_true", help="also time facets(q) after each query")
    a.add_argument("--reps", type=int, default=2)
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--limit", type=int, default=20)
    c = sub.add_parser("ctl")
    c.add_argument("--config", required=True)
    c.add_argument("--recoll", required=True)
    c.add_argument("--reps", type=int, default=3)
    c.add_argument("--limit", type=int, default=20)
    c.add_argument("--repo", default=str(REPO), help="the checkout the daemon runs (PYTHONPATH)")
    args = ap.parse_args()
    started = datetime.now(timezone.utc)
    res: dict = {"started": started.isoformat(timespec="seconds"), "load_start": load(), "argv": sys.argv[1:]}
    if args.cmd == "inproc":
        res["inproc"] = inproc(pairs_arg(args.state), pairs_arg(args.code or [f"this={REPO}"]), args.reps,
                               args.rounds, args.limit, pairs_arg(args.pair) if args.pair else None, args.facets)
    else:
        res["ctl"] = ctl(args.config, args.recoll, args.reps, args.limit, Path(args.repo).resolve())
    res["load_end"] = load()
    res["ended"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    outdir = HERE / "out"
    outdir.mkdir(exist_ok=True)
    (outdir / f"queries-{started:%Y%m%d-%H%M%S}.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
