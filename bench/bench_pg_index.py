#!/usr/bin/env python3
"""The PostgreSQL index engine beside tantivy, and its tsvector from our analyzer vs to_tsvector.

  bench_pg_index.py [--docs DIR] [--repeat 5]

Starts a throw-away PostgreSQL server (tests/pg.py: Unix socket, fsync off), extracts the text
of every ``*.html`` under --docs (the shared corpus's python-docs; not timed), then in one run:

- ``index``: wall time of one session writing every document and its commit, on the
  postgresql engine and on tantivy (a fresh index each);
- ``tsvector``: the same rows written with ``tsv`` built by PostgreSQL instead
  (``setweight(to_tsvector('simple', title), 'A') || setweight(to_tsvector('simple', content),
  'B')``, server side) -- the cost of analysing in Python;
- ``query``: p50 and p95 of bench/queries.txt (each query --repeat times, limit 10, snippets);
- ``conformance``: of tests/fixtures/text-analysis/expected.json, how many queries give exactly
  the expected files on the postgresql engine, and with to_tsvector/websearch_to_tsquery of
  the 'simple' and 'english' configurations instead of our tokens.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
UTC = timezone.utc


def load_docs(root: Path):
    from indexerd.extract import extract
    from indexerd.index import IndexDoc

    docs = []
    for p in sorted(root.rglob("*.html")):
        ex = extract(p.read_bytes(), "text/html")
        docs.append(IndexDoc(key=p.as_uri(), source="docs", url=p.as_uri(), path=str(p), title=ex.title or p.name,
                             content=ex.text, last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                             media_type="text/html", size=p.stat().st_size))
    return docs


def settings(engine: str, url: str | None = None, schema: str = "bench"):
    from indexerd.config import parse_config

    extra = f'[index.postgresql]\nurl = "{url}"\nschema = "{schema}"\n' if url else ""
    return parse_config(f'[index]\nengine = "{engine}"\n{extra}').index


def index_all(ix, docs) -> float:
    t0 = time.perf_counter()
    s = ix.session()
    for d in docs:
        s.update(d)
    s.commit(merge=True)
    return time.perf_counter() - t0


def server_tsvector(url: str, docs) -> float:
    """The same rows with tsv made by to_tsvector('simple') on the server."""
    import psycopg

    from indexerd.index.postgresql.documents import key_hash, snippet_text, to_bytes

    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        conn.execute("CREATE TABLE srv (LIKE bench.documents INCLUDING ALL)")
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO srv VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, setweight(to_tsvector('simple', %s), 'A') "
                "|| setweight(to_tsvector('simple', left(%s, 1000000)), 'B'), %s)",
                [(key_hash(d.key), d.key, d.source, to_bytes(d.title), to_bytes(d.path), d.media_type, d.date_source,
                  d.last_modified, d.size, d.title, d.content, snippet_text(d)) for d in docs])
        conn.commit()
        return time.perf_counter() - t0


def query_times(ix, queries, repeat: int) -> tuple[float, float]:
    times = []
    for q in queries:
        ix.search(q)
        for _ in range(repeat):
            t0 = time.perf_counter()
            ix.search(q, limit=10)
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def conformance(url: str, tmp: Path) -> dict[str, str]:
    import psycopg

    from indexerd.index import IndexDoc, open_index

    root = REPO / "tests" / "fixtures" / "text-analysis"
    expected = json.loads((root / "expected.json").read_text(encoding="utf-8"))
    files = sorted(root.glob("*.txt"))
    ix = open_index(tmp / "conf", settings("postgresql", url, "conf"))
    s = ix.session()
    for p in files:
        t = p.read_text(encoding="utf-8")
        s.update(IndexDoc(key=p.name, source="f", url=p.name, path=None, title=t, content=t,
                          last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                          media_type="text/plain", size=len(t)))
    s.commit(merge=False)
    ours = sum(sorted(h.key for h in ix.search(q, limit=50)) == names for q, names in expected.items())
    ix.close()
    out = {"ours": ours}
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("CREATE TABLE conf_raw (name text, body text)")
        for p in files:
            conn.execute("INSERT INTO conf_raw VALUES (%s, %s)", (p.name, p.read_text(encoding="utf-8")))
        for cfg in ("simple", "english"):
            ok = 0
            for q, names in expected.items():
                got = [r[0] for r in conn.execute(
                    "SELECT name FROM conf_raw WHERE to_tsvector(%s::regconfig, body) @@ "
                    "websearch_to_tsquery(%s::regconfig, %s) ORDER BY name", (cfg, cfg, q))]
                ok += got == names
            out[cfg] = ok
    out["queries"] = len(expected)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", default=str(REPO.parent.parent / "shared" / "corpus" / "python-docs"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from pg import PgServer

    from indexerd.index import open_index

    docs = load_docs(Path(args.docs))
    mb = sum(len(d.content.encode()) for d in docs) / 1e6
    queries = [q for q in (REPO / "bench" / "queries.txt").read_text().splitlines() if q.strip()]
    server = PgServer.start()
    try:
        server.wait_ready()
        url = server.create_database("bench")
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            rows = {}
            for engine in ("postgresql", "tantivy"):
                ix = open_index(tmp / engine, settings(engine, url if engine == "postgresql" else None))
                wall = index_all(ix, docs)
                p50, p95 = query_times(ix, queries, args.repeat)
                rows[engine] = (wall, p50, p95, ix.size_bytes())
                ix.close()
            srv = server_tsvector(url, docs)
            conf = conformance(url, tmp)
    finally:
        server.stop()
    pg, tv = rows["postgresql"], rows["tantivy"]
    print(f"{len(docs)} documents, {mb:.1f} MB of text; {len(queries)} queries x {args.repeat}\n")
    print("| engine | index wall | query p50 | query p95 | size |\n| --- | ---: | ---: | ---: | ---: |")
    for name, (wall, p50, p95, size) in rows.items():
        print(f"| {name} | {wall:.2f} s | {p50:.1f} ms | {p95:.1f} ms | {size / 1e6:.1f} MB |")
    print(f"\npostgresql / tantivy: index {pg[0] / tv[0]:.2f}x, query p50 {pg[1] / tv[1]:.2f}x, size {pg[3] / tv[3]:.2f}x")
    print(f"tsv from our analyzer (whole session) {pg[0]:.2f} s vs server-side to_tsvector('simple') rows {srv:.2f} s "
          f"({pg[0] / srv:.2f}x)")
    print(f"conformance (expected.json, {conf['queries']} queries exactly right): ours {conf['ours']}, "
          f"to_tsvector 'simple' {conf['simple']}, 'english' {conf['english']}")


if __name__ == "__main__":
    main()
