#!/usr/bin/env python3
"""Local-tree benchmark of `indexerd index` and `ctl search` (issue: core pipeline speed).

Measures, on one tree (default: $BENCH_DATA/docs-fs, built by bench/build_corpus.sh):
  floor       a bare os.scandir + stat walk, timed inside Python (median of 5)
  full_index  `indexerd index TREE --json` from an empty state dir: wall, peak RSS (/usr/bin/time),
              docs/s, input MB/s, index and store size
  nochange    the same command again: the pass time reported by indexerd (timed inside the
              process) as a ratio to the floor, and the whole command's wall time
  1pct        append a fresh token to 1% of the files, re-index, check the token is found in
              exactly those files, then restore them byte for byte (and their mtimes)
  query       the 20 queries of bench/queries.txt: `indexerd ctl search` as a process (start-up
              included) and the query alone in-process; median and p95
Usage: bench/bench_index.py [TREE] [--reps N] [--skip-full STATE_DIR]
Results: a table on stdout and bench/out/index-<date>.json.
"""
from __future__ import annotations

import argparse, json, os, random, shutil, statistics, subprocess, sys, tempfile, time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable


def walk_floor(tree: str) -> float:
    def walk(d):
        n = 0
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    n += walk(e.path)
                else:
                    e.stat(follow_symlinks=False); n += 1
        return n
    times = []
    for _ in range(5):
        t = time.perf_counter(); walk(tree); times.append(time.perf_counter() - t)
    return statistics.median(times)


def run(cmd, env, timed=False):
    if timed:
        cmd = ["/usr/bin/time", "-f", "%M %e", *cmd]
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed: {cmd}\n{p.stderr[-2000:]}")
    rss_mb = None
    if timed:
        last = p.stderr.strip().splitlines()[-1].split()
        rss_mb = int(last[0]) / 1024
    return p.stdout, wall, rss_mb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tree", nargs="?", default=os.path.join(os.environ.get("BENCH_DATA", "/tmp/bench-data"), "docs-fs"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-full", metavar="STATE_DIR", help="reuse an indexed state dir")
    a = ap.parse_args()
    tree = os.path.realpath(a.tree)
    if not os.path.isdir(tree):
        sys.exit(f"{tree}: no corpus; run bench/build_corpus.sh first")
    state = a.skip_full or tempfile.mkdtemp(prefix="indexerd-bench-")
    env = dict(os.environ, STATE_DIRECTORY=state)
    idx = [PY, "-m", "indexerd.cli.main", "index", "--json", tree]
    res: dict = {"tree": tree, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 "machine": f"{os.cpu_count()} cpu, load {os.getloadavg()[0]:.1f}"}
    files = [os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs]
    in_bytes = sum(os.path.getsize(f) for f in files)
    res["files"], res["input_mb"] = len(files), round(in_bytes / 1e6, 1)
    res["floor_s"] = walk_floor(tree)
    if not a.skip_full:
        out, wall, rss = run(idx, env, timed=True)
        s = json.loads(out)
        res["full_index"] = {"wall_s": round(wall, 2), "pass_s": s["elapsed_seconds"], "peak_rss_mb": round(rss),
                             "indexed": s["indexed"], "skipped": s["skipped"], "errors": s["errors"],
                             "docs_per_s": round(s["indexed"] / wall, 1), "input_mb_per_s": round(in_bytes / 1e6 / wall, 2),
                             "index_mb": round(sum(p.stat().st_size for p in Path(state, "index").iterdir()) / 1e6, 1),
                             "store_mb": round(Path(state, "state.sqlite3").stat().st_size / 1e6, 1)}
    nc = []
    for _ in range(a.reps):
        out, wall, rss = run(idx, env, timed=True)
        s = json.loads(out)
        assert s["indexed"] == 0 and s["unchanged"] == s["seen"], s
        nc.append((s["elapsed_seconds"], wall, rss))
    res["nochange"] = {"pass_s": statistics.median(x[0] for x in nc), "wall_s": round(statistics.median(x[1] for x in nc), 3),
                       "rss_mb": round(statistics.median(x[2] for x in nc)),
                       "pass_over_floor": round(statistics.median(x[0] for x in nc) / res["floor_s"], 2)}
    # 1%: append a token, re-index, check, restore
    rng = random.Random(7)
    chosen = rng.sample(sorted(f for f in files if f.endswith((".txt", ".html")) or "." not in os.path.basename(f)),
                        max(1, len(files) // 100))
    token = f"benchmod{rng.randrange(10**9)}"
    saved = {f: (Path(f).read_bytes(), os.stat(f)) for f in chosen}
    try:
        for f in chosen:
            with open(f, "ab") as fh:
                fh.write(f"\n{token}\n".encode())
        out, wall, rss = run(idx, env, timed=True)
        s = json.loads(out)
        hits = json.loads(run([PY, "-m", "indexerd.cli.main", "ctl", "search", token, "--json", "--limit", "1000"], env)[0])
        res["1pct"] = {"changed": len(chosen), "indexed": s["indexed"], "wall_s": round(wall, 2),
                       "pass_s": s["elapsed_seconds"], "token_hits": len(hits)}
    finally:
        for f, (data, st) in saved.items():
            Path(f).write_bytes(data); os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        run(idx, env)
    queries = [q for q in (HERE / "queries.txt").read_text().splitlines() if q.strip()]
    proc = []
    for q in queries:
        t = time.perf_counter(); run([PY, "-m", "indexerd.cli.main", "ctl", "search", q, "--limit", "20"], env)
        proc.append(time.perf_counter() - t)
    sys.path.insert(0, str(HERE.parent))
    from indexerd.index import open_index
    ix = open_index(state, create=False)
    alone = []
    for _ in range(3):
        for q in queries:
            t = time.perf_counter(); ix.search(q, limit=20); alone.append(time.perf_counter() - t)
    q95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))]
    res["query"] = {"process_p50_ms": round(statistics.median(proc) * 1e3, 1), "process_p95_ms": round(q95(proc) * 1e3, 1),
                    "alone_p50_ms": round(statistics.median(alone) * 1e3, 1), "alone_p95_ms": round(q95(alone) * 1e3, 1)}
    outdir = HERE / "out"; outdir.mkdir(exist_ok=True)
    (outdir / f"index-{datetime.now():%Y%m%d-%H%M%S}.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    if not a.skip_full:
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
