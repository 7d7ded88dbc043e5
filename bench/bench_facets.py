#!/usr/bin/env python3
"""What the search page's facets and "did you mean" cost beside the search itself (issue 34).

  bench_facets.py [--docs 100000] [--reps 2] [--engines whoosh,tantivy,postgresql]

Builds one index per engine of --docs generated documents (not timed beyond the build's wall
time; 30-60 words each from a 20,000-word Zipf vocabulary, 6 media types, 4 sources; the
PostgreSQL engine on a throw-away server, tests/pg.py), then for each query -- a broad word (in
about half the documents), a middling one (about 5%), a rare one (a handful), and a broad word
under a source filter -- times, on each engine, in alternating order, --reps rounds, each
figure the median of 5 calls:

- ``search``: the page's search (limit 10, snippets) and its ``count`` -- what a page cost before;
- ``facets``: :meth:`SearchIndex.facets` of the same query;
- ``suggest``: :func:`indexerd.index.suggest.suggest` for a misspelled word (what a 0-hit page
  adds) and ``similar_terms`` alone.

Prints a table (milliseconds, and facets as a ratio to the search it sits beside) and writes
bench/out/facets-<date>.json.
"""
from __future__ import annotations

import argparse
import json
import os
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
MEDIA_TYPES = ["text/html", "text/plain", "application/pdf", "text/markdown", "message/rfc822", "application/epub+zip"]
SOURCES = ["docs", "mail", "web", "papers"]


def vocabulary(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct pronounceable words of 4-10 letters."""
    cons, vow = "bcdfghjklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(cons) + rng.choice(vow) for _ in range(rng.randint(2, 5))))
    return sorted(words)


def documents(n: int, seed: int = 7):
    from indexerd.index import IndexDoc

    rng = random.Random(seed)
    vocab = vocabulary(20_000, rng)
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    for i in range(n):
        words = rng.choices(vocab, weights=weights, k=rng.randint(30, 60))
        yield IndexDoc(key=f"file:///bench/{i}.txt", source=SOURCES[i % 4], url=f"file:///bench/{i}.txt",
                       path=f"/bench/{i}.txt", title=" ".join(words[:4]), content=" ".join(words),
                       last_modified=datetime(2020 + i % 5, 1 + i % 12, 1, tzinfo=UTC), date_source="mtime",
                       media_type=MEDIA_TYPES[(i * 7) % 6], size=300)
    return vocab


def settings(engine: str, url: str | None):
    from indexerd.config import parse_config

    extra = f'[index.postgresql]\nurl = "{url}"\nschema = "facets"\n' if engine == "postgresql" else ""
    return parse_config(f'[index]\nengine = "{engine}"\n{extra}').index


def build(engine: str, n: int, url: str | None, base: Path):
    from indexerd.index import open_index

    ix = open_index(base / engine, settings(engine, url))
    t0 = time.perf_counter()
    s = ix.session()
    for k, d in enumerate(documents(n)):
        s.update(d)
        if k and k % 20_000 == 0:
            s.commit(merge=False)
            s = ix.session()
    s.commit(merge=True)
    return ix, time.perf_counter() - t0


def median_ms(fn, calls: int = 5) -> float:
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def pick_queries(ix) -> dict[str, str]:
    """Words of the generated vocabulary by how many documents hold them."""
    rng = random.Random(7)
    vocab = vocabulary(20_000, rng)
    broad, middling, rare = vocab[0], None, None
    for w in vocab[1:400]:
        c = ix.count(w)
        if middling is None and c < ix.count(None) * 0.08:
            middling = w
    for w in vocab[-50:]:
        c = ix.count(w)
        if 0 < c <= 20:
            rare = w
            break
    return {"broad": broad, "middling": middling or vocab[50], "rare": rare or vocab[-1],
            "broad+source": f"{broad} source:mail"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--engines", default="whoosh,tantivy,postgresql")
    args = ap.parse_args()
    from indexerd.index.analysis import analyzer
    from indexerd.index.suggest import suggest

    engines = args.engines.split(",")
    server = None
    url = None
    if "postgresql" in engines:
        from pg import PgServer

        server = PgServer.start()
        url = server.url()
    base = Path(tempfile.mkdtemp(prefix="bench-facets-"))
    out: dict = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "docs": args.docs,
                 "load_before": os.getloadavg(), "build_seconds": {}, "rounds": []}
    indexes = {}
    try:
        for e in engines:
            indexes[e], out["build_seconds"][e] = build(e, args.docs, url, base)
            print(f"{e}: built {args.docs} documents in {out['build_seconds'][e]:.0f} s", flush=True)
        queries = pick_queries(indexes[engines[0]])
        out["queries"] = {k: [v, indexes[engines[0]].count(v)] for k, v in queries.items()}
        typo = queries["middling"][:2] + queries["middling"][3:]   # one letter dropped
        out["typo"] = typo
        a = analyzer()
        for rep in range(args.reps):
            order = engines if rep % 2 == 0 else list(reversed(engines))
            for e in order:
                ix = indexes[e]
                row: dict = {"rep": rep, "engine": e}
                for name, q in queries.items():
                    row[f"search:{name}"] = median_ms(lambda: (ix.search(q, limit=10), ix.count(q)))
                    row[f"facets:{name}"] = median_ms(lambda: ix.facets(q))
                row["suggest"] = median_ms(lambda: suggest(ix, typo, a))
                row["similar_terms"] = median_ms(lambda: ix.similar_terms(a.tokens(typo)[0]))
                out["rounds"].append(row)
                print(json.dumps(row), flush=True)
        out["load_after"] = os.getloadavg()
    finally:
        for ix in indexes.values():
            ix.close()
        if server is not None:
            server.stop()
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    dest = REPO / "bench" / "out"
    dest.mkdir(exist_ok=True)
    (dest / f"facets-{datetime.now(UTC):%Y%m%d-%H%M}.json").write_text(json.dumps(out, indent=1))
    print(f"\nqueries (word, documents): {out['queries']}; typo {typo!r}")
    print(f"{'engine':11} {'query':14} {'search ms':>10} {'facets ms':>10} {'ratio':>6}")
    for e in engines:
        rows = [r for r in out["rounds"] if r["engine"] == e]
        for name in queries:
            s = statistics.median(r[f"search:{name}"] for r in rows)
            f = statistics.median(r[f"facets:{name}"] for r in rows)
            print(f"{e:11} {name:14} {s:10.1f} {f:10.1f} {f / s:6.2f}")
        print(f"{e:11} {'suggest':14} {statistics.median(r['suggest'] for r in rows):10.1f}"
              f"   similar_terms {statistics.median(r['similar_terms'] for r in rows):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
