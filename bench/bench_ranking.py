#!/usr/bin/env python3
"""Ranking, measured (issue 34): the judged set on every engine and on Recoll, in one run.

  bench_ranking.py [--tree ../shared/corpus] [--engines whoosh,tantivy,postgresql] [--json]

bench/judged/queries.toml holds the queries, each with the one document that answers it and
why.  The tree (read in place, never written) is indexed from scratch by the real indexer on
each engine (a one-shot pass, as ``indexerd index``; the PostgreSQL engine on a throw-away
server, tests/pg.py) and by ``recollindex`` (the peer harness's recoll.conf, benchlib.Recoll).
Each query is asked as typed: ``SearchIndex.search(q, limit=10)`` (relevance), and
``recollq -b -n 10 q`` (Recoll's query language: words side by side all required, as ours).

Per engine: MRR@10 (the mean of 1/rank of the judged document, 0 when it is not in the top
10), the top-3 rate (judged document at rank 1-3) and the rank-1 rate; and per query each
engine's rank, so misses can be read.  Writes bench/out/ranking-<date>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(HERE))
UTC = timezone.utc
LIMIT = 10


def judged(path: Path = HERE / "judged" / "queries.toml") -> list[dict]:
    """The judged queries (``q``, ``doc`` relative to the tree, ``why``)."""
    return tomllib.loads(path.read_text(encoding="utf-8"))["query"]


def index_engine(engine: str, tree: Path, work: Path, pg_url: str | None):
    """``tree`` indexed by the real indexer on ``engine`` (one pass); the open index."""
    from conftest import one_pass

    from indexerd.config import load_config
    from indexerd.index import open_index

    state = work / engine
    state.mkdir(parents=True)
    pg = f'[index.postgresql]\nurl = "{pg_url}"\nschema = "ranking"\n' if engine == "postgresql" else ""
    cfg = state / "indexerd.toml"
    cfg.write_text(f'state_dir = "{state / "state"}"\ncontrol_socket = "{state / "s.sock"}"\n'
                   f'[index]\nengine = "{engine}"\n{pg}'
                   f'[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\nwatch = false\n', encoding="utf-8")
    config = load_config(str(cfg))
    t0 = time.perf_counter()
    counts = one_pass(config)
    took = time.perf_counter() - t0
    if counts.get("errors"):
        raise RuntimeError(f"{engine}: {counts}")
    return open_index(state / "state", config.index, create=False), took


def rank_of(paths: list[str], doc: Path) -> int | None:
    """The 1-based rank of ``doc`` among ``paths`` (None: not there)."""
    for i, p in enumerate(paths, 1):
        if Path(p) == doc:
            return i
    return None


def recoll_paths(conf: str, q: str) -> list[str]:
    p = subprocess.run(["recollq", "-c", conf, "-b", "-n", str(LIMIT), q], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"recollq {q!r}: {p.stderr[-500:]}")
    from urllib.parse import unquote

    return [unquote(line[len("file://"):]) for line in p.stdout.splitlines() if line.startswith("file://")]


def summary(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {"mrr": round(sum(1 / r for r in ranks if r) / n, 3),
            "top3": round(sum(1 for r in ranks if r and r <= 3) / n, 3),
            "top1": round(sum(1 for r in ranks if r == 1) / n, 3),
            "missed": sum(1 for r in ranks if not r)}


def snippet_summary(hits: list[list]) -> dict:
    """Issue 34: "every snippet of a top-10 hit contains a query term when the body has one".
    Over every top-10 hit: how many snippets mark a match, how many say why there is none
    (``snippet_note``, by note), and the failures: no mark and no note, or the snippet time budget
    ran out (the body may have had a match)."""
    from indexerd.index.snippets import NOTE_BUDGET

    marked = sum(1 for hs in hits for h in hs if h.marks)
    notes: dict[str, int] = {}
    failed = []
    for hs in hits:
        for h in hs:
            if h.marks:
                continue
            if h.snippet_note is None or h.snippet_note == NOTE_BUDGET:
                failed.append(h.path or h.key)
            notes[h.snippet_note or "(none)"] = notes.get(h.snippet_note or "(none)", 0) + 1
    return {"hits": sum(len(hs) for hs in hits), "marked": marked, "notes": notes, "failed": failed}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--engines", default="whoosh,tantivy,postgresql")
    ap.add_argument("--no-recoll", action="store_true")
    args = ap.parse_args()
    tree = Path(args.tree).resolve()
    queries = judged()
    engines = args.engines.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-ranking-"))
    server = None
    out: dict = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "tree": str(tree),
                 "queries": len(queries), "load_before": os.getloadavg(), "index_seconds": {}, "per_query": []}
    try:
        pg_url = None
        if "postgresql" in engines:
            from pg import PgServer

            server = PgServer.start()
            pg_url = server.url()
        found: dict[str, list[list[str]]] = {}
        for e in engines:
            ix, took = index_engine(e, tree, work, pg_url)
            out["index_seconds"][e] = round(took, 1)
            try:
                hits = [ix.search(q["q"], limit=LIMIT) for q in queries]
            finally:
                ix.close()
            found[e] = [[h.path or h.key for h in hs] for hs in hits]
            out.setdefault("snippets", {})[e] = snippet_summary(hits)
        if not args.no_recoll:
            from benchlib import Recoll

            rc = Recoll(str(tree), str(work))
            rc.fresh()
            t0 = time.perf_counter()
            rc.index()
            out["index_seconds"]["recoll"] = round(time.perf_counter() - t0, 1)
            found["recoll"] = [recoll_paths(rc.conf, q["q"]) for q in queries]
        names = list(found)
        ranks = {n: [rank_of(found[n][i], tree / q["doc"]) for i, q in enumerate(queries)] for n in names}
        for i, q in enumerate(queries):
            out["per_query"].append({"q": q["q"], "doc": q["doc"], **{n: ranks[n][i] for n in names},
                                     "top": {n: os.path.relpath(found[n][i][0], tree) if found[n][i] else None
                                             for n in names}})
        out["summary"] = {n: summary(ranks[n]) for n in names}
        out["load_after"] = os.getloadavg()
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    dest = HERE / "out"
    dest.mkdir(exist_ok=True)
    (dest / f"ranking-{datetime.now(UTC):%Y%m%d-%H%M}.json").write_text(json.dumps(out, indent=1))
    names = list(out["summary"])
    print(f"{len(queries)} judged queries over {tree}; load {out['load_before'][0]:.1f} -> {out['load_after'][0]:.1f}")
    print(f"{'':10}" + "".join(f"{n:>12}" for n in names))
    for k in ("mrr", "top3", "top1", "missed"):
        print(f"{k:10}" + "".join(f"{out['summary'][n][k]:>12}" for n in names))
    for n, sn in out.get("snippets", {}).items():
        print(f"snippets, {n}: {sn['marked']} of {sn['hits']} top-10 hits mark a match; without: {sn['notes']}; "
              f"failed: {len(sn['failed'])} {sn['failed'][:5]}")
    print("\nranks per query (- : not in the top 10):")
    for row in out["per_query"]:
        cells = "".join(f"{(row[n] or '-'):>4}" for n in names)
        print(f"{cells}  {row['q']!r} -> {row['doc']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
