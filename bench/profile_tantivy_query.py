#!/usr/bin/env python3
"""Issue 31 (1): where a tantivy query's time goes, stage by stage, on one index.

  profile_tantivy_query.py STATE_DIR [--reps 2] [--runs 3]

For each of run_all.py's ``SCALE_QUERIES`` (limit 20), the median milliseconds of ``RUNS``
calls, after one warm-up call, of: the engine's ``search`` (snippets included), ``search`` with
no snippet (``snippets_for`` choosing none), tantivy's own top-20 (``Searcher.search`` of the
compiled query, ``count=False``) and tantivy's ``Count`` collector (``count=True``).  Then the
content field's phrase ``"difo masuf"`` against the AND of its two terms, with their matches:
the cost of checking positions; on an index with word pairs (format 3), also the pair's term
query ``difo.masuf`` on ``content_pairs``, which answers that phrase now, and two three-word
phrases as tantivy's positional phrase against the engine's (the same phrase on the documents
holding its pairs).  ``REPS`` repetitions; JSON lines to stdout, the 1-minute load
(``/proc/loadavg``) with each repetition.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_all import SCALE_QUERIES  # noqa: E402


def median_ms(fn, runs: int) -> float:
    """Median wall milliseconds of ``runs`` calls of ``fn`` after one warm-up call."""
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return round(statistics.median(ts) * 1e3, 2)


def main() -> None:
    a = argparse.ArgumentParser()
    a.add_argument("state")
    a.add_argument("--reps", type=int, default=2)
    a.add_argument("--runs", type=int, default=3)
    args = a.parse_args()

    import tantivy

    from indexerd.index import open_index
    from indexerd.index.tantivy.compile import compile_query
    from indexerd.index.tantivy.compile import phrase as pair_phrase

    ix = open_index(args.state, create=False)
    try:
        for rep in range(args.reps):
            load = Path("/proc/loadavg").read_text().split()[0]
            s = ix.searcher()  # type: ignore[attr-defined]
            for qs in SCALE_QUERIES:
                q = compile_query(ix._analysed(qs), ix.schema, s)  # type: ignore[attr-defined]
                row = {"rep": rep, "load": load, "query": qs,
                       "search": median_ms(lambda: ix.search(qs, limit=20), args.runs),
                       "no_snippets": median_ms(lambda: ix.search(qs, limit=20, snippets_for=lambda k: ()),
                                                args.runs)}
                if q is not None:
                    row["tantivy_top20"] = median_ms(lambda: s.search(q, limit=20, count=False), args.runs)
                    row["tantivy_count"] = median_ms(lambda: s.search(q, limit=1, count=True), args.runs)
                print(json.dumps(row), flush=True)
            T = tantivy.Query
            phrase = T.phrase_query(ix.schema, "content", ["difo", "masuf"])
            both = T.boolean_query([(tantivy.Occur.Must, T.term_query(ix.schema, "content", w))
                                    for w in ("difo", "masuf")])
            stages = [("content phrase", phrase), ("content AND", both)]
            try:  # an index of format 3 or later: the phrase's word pair (indexerd/index/tantivy/pairs.py)
                stages.append(("content pair", T.term_query(ix.schema, "content_pairs", "difo.masuf")))
            except ValueError:  # no such field: an index written before the pairs
                pass
            else:  # three words: positions read for every document holding the words, or only
                for words in (["difo", "masuf", "difo"], ["difo", "masuf", "refobo"]):  # for those with the pairs
                    stages.append((f"content phrase {' '.join(words)}", T.phrase_query(ix.schema, "content", words)))
                    stages.append(("... through its pairs", pair_phrase(ix.schema, "content", tuple(words), s)))
            for name, q in stages:
                print(json.dumps({"rep": rep, "load": load, "query": name, "segments": s.num_segments,
                                  "matches": s.search(q, limit=1, count=True).count,  # type: ignore[attr-defined]
                                  "tantivy_top20": median_ms(lambda: s.search(q, limit=20, count=False),
                                                             args.runs)}), flush=True)
    finally:
        ix.close()


if __name__ == "__main__":
    main()
