#!/usr/bin/env python3
"""Memory of a tree's reconcile pass: peak RSS of an unchanged ``indexerd index`` against the
tree's size, on the SQLite store and on the PostgreSQL store (issue 16: whole-source reads
streamed or chunked).

  bench_scan_memory.py [--files 20000,100000] [--layouts sqlite,pg] [--work DIR]

For each size N it writes N small files (a few words each, 100 per directory, 20 directories per
parent) and a config on the tantivy engine (the fastest first index; the reconcile does not read
the index), runs ``indexerd index`` once to fill the store, then three unchanged passes, and
reports the median peak memory of the process tree (bench/benchlib.py ``measure``) and its wall
time.  The floor is the same command on a tree of one file: what the process costs before any
document.  ``(peak - floor) / N`` is what each file of the tree costs the pass.  The ``pg``
layout starts a throw-away PostgreSQL server (tests/pg.py) and puts the store and the index on it.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from benchlib import PgForBench, index_run, layout_head  # noqa: E402

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def make_tree(root: Path, n: int) -> None:
    done = root.with_suffix(".done")
    if done.exists() and done.read_text() == str(n):
        return
    shutil.rmtree(root, ignore_errors=True)
    for i in range(n):
        d = root / f"p{i // 2000:03d}" / f"d{i // 100:05d}"
        if i % 100 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"file-{i:07d}.txt").write_text(f"note {i} {WORDS[i % 12]} {WORDS[(i // 12) % 12]}\n")
    done.write_text(str(n))


def config(work: Path, tree: Path, layout: str, pg_url: str | None, tag: str) -> Path:
    cfg = work / f"{tag}.toml"
    cfg.write_text(layout_head(work / tag / "state", layout, pg_url, tag)
                   + f'[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\n')
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="20000,100000")
    ap.add_argument("--layouts", default="sqlite,pg")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-scanmem-"))
    layouts = args.layouts.split(",")
    out: dict = {}
    with PgForBench(layouts) as pg_url:
        sizes = [1] + [int(n) for n in args.files.split(",")]
        for n in sizes:
            tree = work / f"tree{n}"
            make_tree(tree, n)
            for layout in layouts:
                tag = f"{layout}{n}"
                shutil.rmtree(work / tag, ignore_errors=True)
                cfg = config(work, tree, layout, pg_url, tag)
                first = index_run(cfg)
                again = [index_run(cfg) for _ in range(args.reps)]
                out.setdefault(layout, {})[n] = {
                    "first_wall_s": round(first["wall"], 2),
                    "unchanged_peak_mb": round(statistics.median(m["peak_rss_mb"] for m in again), 1),
                    "unchanged_wall_s": round(statistics.median(m["wall"] for m in again), 3)}
                print(f"{layout:7} {n:>7} files: {out[layout][n]}", file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))
    print("\n| store | files | unchanged pass, peak memory | per file above the floor | wall |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for layout, rows in out.items():
        floor = rows[1]["unchanged_peak_mb"]
        for n, r in rows.items():
            per = "" if n == 1 else f"{(r['unchanged_peak_mb'] - floor) * 1024 * 1024 / n:.0f} B"
            print(f"| {layout} | {n:,} | {r['unchanged_peak_mb']} MB | {per} | {r['unchanged_wall_s']} s |")


if __name__ == "__main__":
    main()
