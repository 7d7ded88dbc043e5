#!/usr/bin/env python3
"""A web source whose store knows millions of URLs, few of them due (issue 31): how long a pass
waits before its first request, what ``ctl status`` and a ``/metrics`` scrape cost with the
daemon up, and the peak memory of a pass -- on the SQLite store and on PostgreSQL.

  bench_known_urls.py [--urls 100000,10000000] [--layouts sqlite,pg] [--reps 3] [--work DIR]

For each N: one web source over a two-page loopback site (tests/httpsite.py), ``interval =
"1h"``, ``max_recrawl_interval = "30d"``; one ``indexerd index`` makes the store (pass 1); then N
pages are written straight into it (a crawl row and a document row each, in URL order: pages
asked and indexed in an earlier pass, due in ten days), two of them due now.  Then:

- **first fetch**: ``Indexer.run_pass`` in this process, from the call to the first request the
  site sees (the seed host's robots.txt), median of ``--reps`` passes (each asks the seed and the
  pages due; the two due pages are made due again before each);
- **pass peak**: the peak RSS of a whole ``indexerd index`` process (benchlib ``measure``);
- **status / metrics**: with ``indexerd run`` up (its ``[http]`` listener on loopback), the
  ``status`` request on the control socket (one JSON line, the daemon's answer timed) and a
  ``GET /metrics``, median of 7 each after one warm-up; also the whole ``indexerd ctl status``
  command once, for scale (it is mostly the interpreter's start).

The ``pg`` layout starts a throw-away PostgreSQL server (tests/pg.py) and puts the store and the
index on it; its rows are loaded with COPY.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from benchlib import PY, PgForBench, index_run, layout_head  # noqa: E402

HTML = {"Content-Type": "text/html; charset=utf-8"}
UTC = timezone.utc
BATCH = 50_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(work: Path, seed: str, layout: str, pg_url: str | None, tag: str, port: int) -> Path:
    cfg = work / f"{tag}.toml"
    (work / tag).mkdir(parents=True, exist_ok=True)
    cfg.write_text(f'control_socket = "{work / tag}/ctl.sock"\n'
                   + layout_head(work / tag / "state", layout, pg_url, tag)
                   + f'[http]\nlisten = "127.0.0.1:{port}"\n'
                   + f'[[sources.web]]\nname = "site"\nseeds = ["{seed}"]\ninterval = "1h"\n'
                   'max_recrawl_interval = "30d"\nsitemaps = false\n'
                   '[sources.web.politeness]\nmin_delay = "0s"\n')
    return cfg


def t(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def page_rows(base: str, n: int):
    """``(crawl row, document row)`` of N pages, in URL order; pages 0 and 1 due now."""
    now = datetime.now(UTC)
    later, past = t(now + timedelta(days=10)), t(now - timedelta(hours=1))
    stamp = t(now - timedelta(days=1))
    for i in range(n):
        url = f"{base}/old/{i:08d}/page-with-a-longer-name.html"
        crawl = ("site", url, 0, "done", 1, 1, i, "link", None, 0, None, None, None, 0, 0, 200,
                 "indexed:new", stamp, 864000.0, past if i < 2 else later, "learnt", None)
        doc = (url, "site", "indexed", "new", None, f"page {i}", "text/html", 2000, None, stamp, "header",
               None, None, None, f"h{i:012d}", stamp, stamp, stamp)
        yield crawl, doc


CRAWL_COLS = ("source", "url", "pass_id", "state", "hops", "seed_depth", "seq", "via", "origin", "redirects",
              "doc_key", "links", "sitemap_lastmod", "gone_count", "fail_count", "last_status", "last_outcome",
              "checked_at", "recrawl_seconds", "due_at", "due_reason", "changefreq")
DOC_COLS = ("key", "source", "status", "reason", "detail", "title", "media_type", "size", "mtime_ns",
            "last_modified", "date_source", "date_notes", "etag", "last_modified_header", "content_hash",
            "indexed_at", "checked_at", "decided_at")


def load_pages(cfg: Path, layout: str, pg_url: str | None, tag: str, base: str, n: int) -> float:
    """Write N pages into the store of ``cfg``; returns the seconds it took."""
    t0 = time.perf_counter()
    if layout == "pg":
        import psycopg

        with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=False) as db:
            db.execute("SET synchronous_commit = off")
            with db.cursor() as cur:
                # one COPY a table: the document counts' trigger runs once, over the whole load
                with cur.copy(f'COPY "st_{tag}".crawl ({", ".join(CRAWL_COLS)}) FROM STDIN') as cp:
                    for c, _ in page_rows(base, n):
                        cp.write_row(c)
                with cur.copy(f'COPY "st_{tag}".documents ({", ".join(DOC_COLS)}) FROM STDIN') as cp:
                    for _, d in page_rows(base, n):
                        cp.write_row(d)
            db.commit()
            db.autocommit = True
            db.execute(f'ANALYZE "st_{tag}".crawl')
            db.execute(f'ANALYZE "st_{tag}".documents')
    else:
        db = sqlite3.connect(cfg.parent / tag / "state" / "state.sqlite3")
        db.execute("PRAGMA synchronous = OFF")
        crawl_sql = f"INSERT INTO crawl ({', '.join(CRAWL_COLS)}) VALUES ({', '.join('?' * len(CRAWL_COLS))})"
        doc_sql = f"INSERT INTO documents ({', '.join(DOC_COLS)}) VALUES ({', '.join('?' * len(DOC_COLS))})"
        with db:
            batch: list = []
            for pair in page_rows(base, n):
                batch.append(pair)
                if len(batch) >= BATCH:
                    db.executemany(crawl_sql, (c for c, _ in batch))
                    db.executemany(doc_sql, (d for _, d in batch))
                    batch = []
            db.executemany(crawl_sql, (c for c, _ in batch))
            db.executemany(doc_sql, (d for _, d in batch))
        db.close()
    return time.perf_counter() - t0


def make_due_again(cfg: Path, layout: str, pg_url: str | None, tag: str, base: str) -> None:
    past = t(datetime.now(UTC) - timedelta(hours=1))
    urls = [f"{base}/old/{i:08d}/page-with-a-longer-name.html" for i in (0, 1)]
    sql = "UPDATE {p}crawl SET due_at = {ph}, pass_id = 0 WHERE source = 'site' AND url = {ph}"
    if layout == "pg":
        import psycopg

        with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as db:
            for u in urls:
                db.execute(sql.format(p=f'"st_{tag}".', ph="%s"), (past, u))
    else:
        with sqlite3.connect(cfg.parent / tag / "state" / "state.sqlite3") as db:
            for u in urls:
                db.execute(sql.format(p="", ph="?"), (past, u))


def first_fetch(cfg: Path, site) -> float:
    """Seconds from ``run_pass`` to the first request the site sees."""
    from indexerd.config import load_config
    from indexerd.runtime.indexer import Indexer

    ix = Indexer(load_config(str(cfg)))
    ix.open("index")
    try:
        mark = len(site.log)
        t0 = time.monotonic()
        ix.run_pass(progress=False)
        return site.log[mark].arrived - t0
    finally:
        ix.close()


def control(sock: str, request: dict) -> tuple[float, dict]:
    t0 = time.perf_counter()
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(json.dumps(request).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    return time.perf_counter() - t0, json.loads(buf)


def daemon_figures(cfg: Path, tag_dir: Path, port: int) -> dict:
    sock = str(tag_dir / "ctl.sock")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen([PY, "-m", "indexerd.cli.main", "-c", str(cfg), "run"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                control(sock, {"cmd": "status"})
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
                break
            except (OSError, ValueError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the daemon did not come up: " + proc.stderr.read().decode()[-2000:])
                time.sleep(0.2)
        status = [control(sock, {"cmd": "status"})[0] for _ in range(8)][1:]
        metrics = []
        for _ in range(8):
            t0 = time.perf_counter()
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
            metrics.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([os.path.join(os.path.dirname(PY), "indexerd"), "ctl", "-c", str(cfg), "status", "--json"],
                       check=True, capture_output=True, env=env)
        whole = time.perf_counter() - t0
        _, doc = control(sock, {"cmd": "status"})
        docs = doc.get("sources", {}).get("site", {}).get("documents")
        return {"status_s": round(statistics.median(status), 4), "metrics_s": round(statistics.median(metrics[1:]), 4),
                "ctl_status_command_s": round(whole, 3), "documents": docs}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    from httpsite import Site

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", default="100000,10000000")
    ap.add_argument("--layouts", default="sqlite,pg")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-known-"))
    layouts = args.layouts.split(",")
    site = Site().start()
    site.add("/", body=b'<html><body><p>benchword</p><a href="/b.html">b</a></body></html>', headers=HTML)
    site.add("/b.html", body=b"<html><body><p>second page</p></body></html>", headers=HTML)
    out: dict = {}
    try:
        with PgForBench(layouts) as pg_url:
            for n in [int(x) for x in args.urls.split(",")]:
                for layout in layouts:
                    tag = f"{layout}{n}"
                    shutil.rmtree(work / tag, ignore_errors=True)
                    port = free_port()
                    cfg = config(work, site.url("/"), layout, pg_url, tag, port)
                    index_run(cfg)
                    load_s = load_pages(cfg, layout, pg_url, tag, site.base, n)
                    print(f"{layout} {n:,}: loaded in {load_s:.0f} s", file=sys.stderr, flush=True)
                    firsts = []
                    for _ in range(args.reps):
                        make_due_again(cfg, layout, pg_url, tag, site.base)
                        firsts.append(first_fetch(cfg, site))
                    make_due_again(cfg, layout, pg_url, tag, site.base)
                    peak = index_run(cfg)
                    row = {"first_fetch_s": round(statistics.median(firsts), 3),
                           "first_fetch_all_s": [round(x, 3) for x in firsts],
                           "pass_peak_mb": round(peak["peak_rss_mb"], 1), "pass_wall_s": round(peak["wall"], 2),
                           "load_s": round(load_s)}
                    row.update(daemon_figures(cfg, work / tag, port))
                    out.setdefault(layout, {})[n] = row
                    print(f"{layout:7} {n:>10,} known URLs: {row}", file=sys.stderr, flush=True)
                    if n >= 1_000_000 and layout == "pg":
                        import psycopg

                        with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as db:
                            db.execute(f'DROP SCHEMA "st_{tag}" CASCADE')
                    shutil.rmtree(work / tag, ignore_errors=True)
    finally:
        site.close()
    print(json.dumps(out, indent=1))
    print("\n| store | known URLs | first fetch after the pass starts | `status` (daemon's answer) "
          "| `/metrics` | pass peak RSS | `indexerd ctl status` whole command |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for layout, rows in out.items():
        for n, r in rows.items():
            print(f"| {layout} | {n:,} | {r['first_fetch_s'] * 1000:.0f} ms | {r['status_s'] * 1000:.1f} ms "
                  f"| {r['metrics_s'] * 1000:.1f} ms | {r['pass_peak_mb']} MB | {r['ctl_status_command_s'] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
