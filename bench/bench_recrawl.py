#!/usr/bin/env python3
"""Adaptive recrawl on an nginx-served site where 1% of the pages change before each pass.

  bench/bench_recrawl.py [--pages 300] [--passes 300] [--baseline-passes 20] [--seed 1]

A generated site (``--pages`` HTML pages, each linked from ``index.html`` and from three
neighbours; mtimes fixed) is served by nginx on loopback (bench/nginxsite.py, as bench_web.py
does).  The crawler runs in process (``indexerd.runtime.indexer.Indexer``, one per pass like one
``indexerd index``), with politeness off and the web source's clock set to simulated time: pass
``k`` runs at ``T0 + k x interval`` (``interval = "1h"``), so hundreds of hourly passes take
minutes.  Before each pass after the first, 1% of the pages (random, the same sequence for both
runs) get a new word appended and a new mtime.

Two runs from an empty state dir each:

  every page   ``max_recrawl_interval = interval``: every known page asked at every pass (the
               behaviour before adaptive recrawl), ``--baseline-passes`` passes;
  adaptive     ``max_recrawl_interval = "7d"`` (the default), ``--passes`` passes.

Reported per run and window of passes: page requests per pass (robots.txt and sitemap.xml
counted apart), and for each edit how many passes passed before the page was fetched whole
again (0 = the pass right after the edit): mean, p95, max, share found at once.  The figures go
to stdout as markdown and to bench/out/recrawl.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from nginxsite import Nginx, NginxError  # noqa: E402

from indexerd.config import parse_config  # noqa: E402
from indexerd.runtime.indexer import Indexer  # noqa: E402

FIXED_MTIME = 1704067200  # 2024-01-01T00:00:00Z
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOT_PAGES = ("/robots.txt", "/sitemap.xml")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build_site(root: Path, pages: int) -> list[str]:
    """``pages`` pages under ``root`` plus an index linking each; returns their URI paths."""
    root.mkdir(parents=True)
    names = [f"p/{i:05d}.html" for i in range(pages)]
    (root / "p").mkdir()
    for i, name in enumerate(names):
        links = " ".join(f'<a href="/{names[(i + d) % pages]}">next {d}</a>' for d in (1, 2, 3))
        (root / name).write_text(f"<html><head><title>Page {i}</title></head><body><p>page number "
                                 f"{i} text</p>{links}</body></html>\n")
    index = "".join(f'<li><a href="/{n}">{n}</a></li>' for n in names)
    (root / "index.html").write_text(f"<html><head><title>Index</title></head><body><ul>{index}</ul></body></html>\n")
    for p in root.rglob("*.html"):
        os.utime(p, (FIXED_MTIME, FIXED_MTIME))
    return ["/" + n for n in names]


def config(state: Path, base: str, max_recrawl: str) -> str:
    return f"""\
state_dir = "{state}"
log_level = "warning"

[[sources.web]]
name = "site"
seeds = ["{base}/"]
interval = "1h"
max_recrawl_interval = "{max_recrawl}"
workers = 4

[sources.web.politeness]
min_delay = "0s"
good_guy_factor = 0
"""


def run(ngx: Nginx, root: Path, pages: list[str], state: Path, max_recrawl: str, passes: int,
        seed: int) -> dict:
    """``passes`` simulated hourly passes; returns per-pass requests and per-edit delays."""
    rng = random.Random(seed)
    cfg = parse_config(config(state, ngx.base, max_recrawl))
    per_pass, extra, edits, wall = [], [], [], []
    pending: dict[str, int] = {}  # page -> the pass its oldest unseen edit was made before
    for k in range(passes):
        if k > 0:
            for page in rng.sample(pages, max(1, len(pages) // 100)):
                path = root / page.lstrip("/")
                with open(path, "a") as f:
                    f.write(f"<p>edit{k}</p>\n")
                os.utime(path, (FIXED_MTIME + k * 3600, FIXED_MTIME + k * 3600))
                pending.setdefault(page, k)
        mark = ngx.mark()
        t = time.perf_counter()
        ix = Indexer(cfg)
        ix.open("index")
        now = T0 + timedelta(hours=k)
        for src in ix.sources.values():
            src.clock = lambda now=now: now
        try:
            ix.run_pass(progress=False)
        finally:
            ix.close()
        wall.append(time.perf_counter() - t)
        hits = ngx.log(mark)
        per_pass.append(sum(1 for e in hits if e["uri"] not in NOT_PAGES))
        extra.append(sum(1 for e in hits if e["uri"] in NOT_PAGES))
        for e in hits:
            if e["status"] == 200 and e["uri"] in pending:
                edits.append((pending.pop(e["uri"]), k))
        if k % 25 == 0:
            log(f"{max_recrawl}: pass {k}: {per_pass[-1]} page requests, {wall[-1]:.2f} s")
    return {"requests": per_pass, "robots_sitemap": extra, "wall": wall,
            "delays": [k_found - k_edit for k_edit, k_found in edits], "unseen": len(pending)}


def summary(res: dict, lo: int, hi: int) -> dict:
    return {"passes": f"{lo}-{min(hi, len(res['requests'])) - 1}",
            "requests_per_pass": statistics.mean(res["requests"][lo:hi]),
            "robots_sitemap_per_pass": statistics.mean(res["robots_sitemap"][lo:hi]),
            "seconds_per_pass": statistics.mean(res["wall"][lo:hi])}


def delays(res: dict) -> dict:
    d = sorted(res["delays"])
    if not d:
        return {}
    return {"edits_found": len(d), "unseen_at_end": res["unseen"], "mean": statistics.mean(d),
            "p95": d[int(0.95 * (len(d) - 1))], "max": d[-1], "at_once": sum(1 for x in d if x == 0) / len(d)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--passes", type=int, default=300)
    ap.add_argument("--baseline-passes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    with tempfile.TemporaryDirectory(prefix="bench-recrawl-") as tmp:
        tmp = Path(tmp)
        root = tmp / "site"
        pages = build_site(root, args.pages)
        try:
            ngx = Nginx(root, tmp / "nginx")
        except NginxError as e:
            sys.exit(f"bench_recrawl: {e}")
        with ngx:
            results = {}
            for name, max_recrawl, passes in (("every page", "1h", args.baseline_passes),
                                              ("adaptive", "7d", args.passes)):
                shutil.rmtree(root)  # the same starting site for both runs
                build_site(root, args.pages)
                results[name] = run(ngx, root, pages, tmp / name.replace(" ", "-"), max_recrawl, passes, args.seed)
    out = {"pages": args.pages, "changed_per_pass": max(1, args.pages // 100), "runs": {}}
    lines = [f"Site: {args.pages} pages + index.html, {max(1, args.pages // 100)} pages (1%) edited before "
             f"each pass; passes 1 h apart (simulated clock).", "",
             "| run | passes | page requests / pass | robots+sitemap / pass | s / pass |",
             "| --- | --- | ---: | ---: | ---: |"]
    for name, res in results.items():
        n = len(res["requests"])
        windows = [(0, 1), (1, n)] if n <= 30 else [(0, 1), (1, 25), (25, 100), (100, 200), (200, n)]
        rows = [summary(res, lo, hi) for lo, hi in windows if lo < n]
        out["runs"][name] = {"windows": rows, "delays": delays(res), "requests": res["requests"]}
        for r in rows:
            lines.append(f"| {name} | {r['passes']} | {r['requests_per_pass']:.1f} | "
                         f"{r['robots_sitemap_per_pass']:.1f} | {r['seconds_per_pass']:.2f} |")
    lines += ["", "| run | edits fetched again | passes until fetched: mean | p95 | max | in the next pass |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in out["runs"].items():
        d = r["delays"]
        if d:
            lines.append(f"| {name} | {d['edits_found']} (+{d['unseen_at_end']} not yet) | {d['mean']:.1f} | "
                         f"{d['p95']} | {d['max']} | {100 * d['at_once']:.0f}% |")
    print("\n".join(lines))
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "recrawl.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
