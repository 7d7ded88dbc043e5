#!/usr/bin/env python3
"""Memory of a web pass against how many URLs its source knows: peak RSS of ``indexerd index``
over a loopback site whose store already holds N crawl rows not due in this pass (adaptive
recrawl), on the SQLite store and on the PostgreSQL store (issue 16: whole-source reads
streamed or chunked).

  bench_crawl_memory.py [--urls 20000,100000] [--layouts sqlite,pg] [--work DIR]

For each N: a config with one web source over a two-page loopback site (tests/httpsite.py),
``interval = "1h"``, ``max_recrawl_interval = "30d"``; one ``indexerd index`` to make the store,
then N rows written into it as pages asked in pass 1 and due in ten days, then three passes (each
asks the seed again, nothing else), reporting the median peak memory of the process
(bench/benchlib.py ``measure``) and its wall time.  The floor is N = 0.  ``(peak - floor) / N`` is
what each known URL costs a pass.  The ``pg`` layout starts a throw-away PostgreSQL server
(tests/pg.py) and puts the store and the index on it.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from benchlib import PgForBench, index_run, layout_head  # noqa: E402

HTML = {"Content-Type": "text/html; charset=utf-8"}


def config(work: Path, seed: str, layout: str, pg_url: str | None, tag: str) -> Path:
    cfg = work / f"{tag}.toml"
    cfg.write_text(layout_head(work / tag / "state", layout, pg_url, tag)
                   + f'[[sources.web]]\nname = "site"\nseeds = ["{seed}"]\ninterval = "1h"\n'
                   'max_recrawl_interval = "30d"\nsitemaps = false\n'
                   '[sources.web.politeness]\nmin_delay = "0s"\n')
    return cfg


def known_urls(cfg: Path, base: str, n: int) -> None:
    """``n`` crawl rows of pages asked in pass 1 and due in ten days, written to cfg's store."""
    from indexerd.config import load_config
    from indexerd.sources import registry  # noqa: F401  (registers the kinds of source with the config)
    from indexerd.core.store import open_store, store_address
    from indexerd.sources.web.urlstate import UrlState

    now = datetime.now(timezone.utc)
    conf = load_config(str(cfg))
    address = store_address(conf)
    with open_store(address if address is not None else Path(conf.state_dir) / "state.sqlite3") as store:
        for start in range(0, n, 5000):
            store.crawl_write("site", [UrlState(f"{base}/old/{i:07d}/page-with-a-longer-name.html", pass_id=1,
                                                state="done", seq=10 + i, hops=1, last_status=200,
                                                last_outcome="fetched", checked_at=now, recrawl_seconds=864000.0,
                                                due_at=now + timedelta(days=10), due_reason="learnt").as_row()
                                       for i in range(start, min(n, start + 5000))])


def main() -> None:
    from httpsite import Site

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", default="20000,100000")
    ap.add_argument("--layouts", default="sqlite,pg")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-crawlmem-"))
    layouts = args.layouts.split(",")
    with PgForBench(layouts) as pg_url:
        out = measure_all(args, work, layouts, pg_url, Site)
    report(out)


def measure_all(args, work: Path, layouts: list[str], pg_url: str | None, Site) -> dict:
    site = Site().start()
    site.add("/", body=b'<html><body><p>benchword</p><a href="/b.html">b</a></body></html>', headers=HTML)
    site.add("/b.html", body=b"<html><body><p>second page</p></body></html>", headers=HTML)
    out: dict = {}
    try:
        for n in [0] + [int(x) for x in args.urls.split(",")]:
            for layout in layouts:
                tag = f"{layout}{n}"
                shutil.rmtree(work / tag, ignore_errors=True)
                cfg = config(work, site.url("/"), layout, pg_url, tag)
                index_run(cfg)
                known_urls(cfg, site.base, n)
                again = [index_run(cfg) for _ in range(args.reps)]
                out.setdefault(layout, {})[n] = {
                    "peak_mb": round(statistics.median(m["peak_rss_mb"] for m in again), 1),
                    "wall_s": round(statistics.median(m["wall"] for m in again), 3)}
                print(f"{layout:7} {n:>7} known URLs: {out[layout][n]}", file=sys.stderr, flush=True)
    finally:
        site.close()
    return out


def report(out: dict) -> None:
    print(json.dumps(out, indent=1))
    print("\n| store | known URLs | pass, peak memory | per known URL above the floor | wall |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for layout, rows in out.items():
        floor = rows[0]["peak_mb"]
        for n, r in rows.items():
            per = "" if n == 0 else f"{(r['peak_mb'] - floor) * 1024 * 1024 / n:.0f} B"
            print(f"| {layout} | {n:,} | {r['peak_mb']} MB | {per} | {r['wall_s']} s |")


if __name__ == "__main__":
    main()
