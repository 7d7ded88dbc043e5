#!/usr/bin/env python3
"""What a new web pass pays to find orphan page requisites (issue 33): the check of its due
requisites against the pages' recorded references
(:meth:`~indexerd.core.store.crawl.CrawlRows.crawl_requisites_referenced`), beside the read it
already makes of its due rows (``crawl_due_rows``), on the SQLite store and on PostgreSQL.

  bench_orphans.py [--pages 1000,20000] [--layouts sqlite,pg] [--reps 3]

For each N: a store holding N pages asked before and due, each kept in the mirror and
referencing two site-wide stylesheets (one of them @importing a third, which names a font) and
two images of its own; every requisite's crawl row due too (adaptive recrawl off); the store
analysed (ANALYZE: the planner statistics a live store has).  Then, ``--reps``
times, the two reads in alternating order: the due rows of the source, and which of the due
requisites a page still needs; then the write-back of every page parsed again, 200 a
transaction, rows alone and rows with their references replaced (the old ones marked to be
checked).  Printed: the median seconds of each and their ratios.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

from benchlib import PgForBench  # noqa: E402

from indexerd.core.store import PgStore, PgStoreAddress, Store  # noqa: E402
from indexerd.sources.web.urlstate import UrlState  # noqa: E402

HOST = "http://site.example"
DUE_BY = "2100-01-01T00:00:00.000000Z"


def fill(store, pages: int) -> list[str]:
    """The rows of ``pages`` pages and their requisites; the requisites' URLs."""
    shared = [f"{HOST}/css/site.css", f"{HOST}/css/print.css"]
    nested = {f"{HOST}/css/site.css": (True, [f"{HOST}/css/base.css"]),
              f"{HOST}/css/base.css": (True, [f"{HOST}/fonts/f.woff2"])}
    requisites = shared + [f"{HOST}/css/base.css", f"{HOST}/fonts/f.woff2"]
    for start in range(0, pages, 5000):
        rows, refs = [], dict(nested) if start == 0 else {}
        for i in range(start, min(pages, start + 5000)):
            url = f"{HOST}/doc/{i:07d}.html"
            images = [f"{HOST}/img/{i:07d}-{k}.png" for k in (1, 2)]
            rows.append(UrlState(url, pass_id=1, state="done", via="link", last_status=200,
                                 last_outcome="indexed:new", seq=i).as_row())
            rows += [UrlState(u, pass_id=1, state="done", via="requisite", last_status=200,
                              last_outcome="requisite", seq=i).as_row() for u in images]
            refs[url] = (False, shared + images)
            requisites += images
        if start == 0:
            rows += [UrlState(u, pass_id=1, state="done", via="requisite", last_status=200,
                              last_outcome="requisite").as_row() for u in requisites[:4]]
        store.crawl_write("site", rows, requisites=refs)
    return requisites


def measure(store, requisites: list[str], reps: int) -> tuple[float, float]:
    due_s, check_s = [], []
    for r in range(reps):
        for which in ((0, 1) if r % 2 == 0 else (1, 0)):
            t = time.perf_counter()
            if which == 0:
                n = len(store.crawl_due_rows("site", 2, DUE_BY))
                due_s.append(time.perf_counter() - t)
                assert n == len(requisites) + (len(requisites) - 4) // 2, n
            else:
                needed = store.crawl_requisites_referenced("site", requisites)
                check_s.append(time.perf_counter() - t)
                assert len(needed) == len(requisites)
    return statistics.median(due_s), statistics.median(check_s)


def measure_writes(store, pages: int, reps: int) -> tuple[float, float]:
    """Seconds to write back ``pages`` pages parsed again, 200 a transaction (a pass's write
    batch): their rows alone (the peer), and their rows with their references replaced (the old
    ones marked to be checked); medians of ``reps``, alternating."""
    shared = [f"{HOST}/css/site.css", f"{HOST}/css/print.css"]
    batches = []
    for start in range(0, pages, 200):
        urls = [f"{HOST}/doc/{i:07d}.html" for i in range(start, min(pages, start + 200))]
        rows = [UrlState(u, pass_id=2, state="done", via="link", last_status=200, last_outcome="indexed:new",
                         seq=i).as_row() for i, u in enumerate(urls)]
        refs = {u: (False, shared + [u.replace("/doc/", "/img/").replace(".html", f"-{k}.png") for k in (1, 2)])
                for u in urls}
        batches.append((rows, refs))
    rows_s, refs_s = [], []
    for r in range(reps):
        for which in ((0, 1) if r % 2 == 0 else (1, 0)):
            t = time.perf_counter()
            for rows, refs in batches:
                store.crawl_write("site", rows, requisites=refs if which else None)
            (refs_s if which else rows_s).append(time.perf_counter() - t)
        store.crawl_requisites_checked("site", store.crawl_requisites_to_check("site"))
    return statistics.median(rows_s), statistics.median(refs_s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", default="1000,20000")
    ap.add_argument("--layouts", default="sqlite,pg")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=None, help="CrawlRows.REFERENCED_CHUNK to try")
    a = ap.parse_args()
    if a.chunk:
        from indexerd.core.store.crawl import CrawlRows
        CrawlRows.REFERENCED_CHUNK = a.chunk
    layouts = a.layouts.split(",")
    with PgForBench(layouts) as pg_url, tempfile.TemporaryDirectory() as work:
        for n in (int(x) for x in a.pages.split(",")):
            for layout in layouts:
                if layout == "pg":
                    address = PgStoreAddress.from_settings(type("S", (), {
                        "url": pg_url, "schema": f"orphans{n}", "password_env": None,
                        "password_file": None, "timeout": 60.0})())
                    store = PgStore(address)
                else:
                    store = Store(Path(work) / f"{n}.sqlite3")
                with store:
                    requisites = fill(store, n)
                    store._db.execute("ANALYZE", ())  # the statistics a live store has (autovacuum)
                    due, check = measure(store, requisites, a.reps)
                    rows_only, with_refs = measure_writes(store, n, a.reps)
                print(f"{layout:6s} {n:>7,} pages, {len(requisites):>7,} due requisites: due rows "
                      f"{due * 1e3:8.1f} ms, requisite check {check * 1e3:8.1f} ms, ratio {check / due:5.2f}x; "
                      f"write-back of {n:,} pages parsed again: rows {rows_only * 1e3:8.1f} ms, with their "
                      f"references {with_refs * 1e3:8.1f} ms, ratio {with_refs / rows_only:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
