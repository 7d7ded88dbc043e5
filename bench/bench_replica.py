#!/usr/bin/env python3
"""Searching from a hot standby (``[index.postgresql] read_url``): what a search costs there and
how soon a commit on the primary is searchable on it.

  bench_replica.py [--docs 5000] [--queries 200]

Starts a throw-away primary and a hot standby of it (tests/pg.py: Unix sockets, fsync off,
``pg_basebackup -R``), indexes --docs synthetic documents (words drawn from a 2,000-word
vocabulary, 200 words each) on the primary, then:

- ``search``: p50 and p95 of --queries one-word searches (limit 10, snippets, the count) on the
  primary alone, and through ``read_url`` (the replica answers, plus the lag measure each search
  takes), and the lag measure alone (``lag_measure``);
- ``visible``: p50 and p95 over 50 one-document commits on the primary of the time until a
  search through the replica finds the document (polled every 1 ms).
"""
from __future__ import annotations

import argparse
import json
import random
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


def words(n: int, rng: random.Random) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4))))
    return sorted(out)


def doc(key: str, text: str):
    from indexerd.index import IndexDoc

    return IndexDoc(key=key, source="b", url=key, path=None, title=key, content=text,
                    last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(text))


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[int(p * (len(xs) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=200)
    a = ap.parse_args()

    from pg import PgServer

    from indexerd.config import parse_config
    from indexerd.daemon.queries import SearchRequest, search_any_engine
    from indexerd.index import open_index

    rng = random.Random(7)
    vocab = words(2000, rng)
    primary = PgServer.start()
    standby = None
    tmp = Path(tempfile.mkdtemp(prefix="ixrb"))
    try:
        primary.wait_ready()
        primary.create_database("ix")
        standby = primary.start_standby()
        base = f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{primary.url("ix")}"\nschema = "b"\n'
        alone = open_index(tmp / "p", parse_config(base).index)
        via = open_index(tmp / "r", parse_config(base + f'read_url = "{standby.url("ix")}"\n').index)
        s = alone.session()
        for i in range(a.docs):
            s.update(doc(f"d{i}", " ".join(rng.choices(vocab, k=200))))
        s.commit(merge=False)
        standby.wait_replayed(primary.wal_lsn(), timeout=300)
        queries = rng.choices(vocab, k=a.queries)
        res: dict = {"docs": a.docs, "queries": a.queries, "search_ms": {}}
        for name, ix in (("primary", alone), ("replica", via)):
            for q in queries[:10]:
                search_any_engine(ix, SearchRequest(query=q))       # warm
            times = []
            for q in queries:
                t0 = time.perf_counter()
                search_any_engine(ix, SearchRequest(query=q))
                times.append((time.perf_counter() - t0) * 1e3)
            res["search_ms"][name] = {"p50": round(statistics.median(times), 2), "p95": round(pct(times, 0.95), 2)}
        lag = []
        for _ in range(a.queries):
            t0 = time.perf_counter()
            via.replica_lag_seconds()
            lag.append((time.perf_counter() - t0) * 1e3)
        res["lag_measure_ms"] = {"p50": round(statistics.median(lag), 3), "p95": round(pct(lag, 0.95), 3)}
        visible = []
        for i in range(50):
            word = f"fresh{i}zz"
            s = alone.session()
            s.update(doc(f"fresh{i}", f"{word} text"))
            t0 = time.perf_counter()
            s.commit(merge=False)
            while not via.search(word, limit=1):
                time.sleep(0.001)
            visible.append((time.perf_counter() - t0) * 1e3)
        res["visible_ms"] = {"p50": round(statistics.median(visible), 2), "p95": round(pct(visible, 0.95), 2)}
        alone.close()
        via.close()
        print(json.dumps(res, indent=1))
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
