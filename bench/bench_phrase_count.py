#!/usr/bin/env python3
"""An exact phrase's count and facets on Whoosh: each apart (two evaluations of its matches) or
together (``count_and_facets``: one).  Alternating order, 4 repetitions, 3 phrases each.

  PYTHONPATH=. bench/bench_phrase_count.py STATE_DIR
"""
import sys
import statistics
import time
from indexerd.index.opening import open_index
ix = open_index(sys.argv[1], create=False)
qs = ['"difo masufe"', '"refobo masufe"', '"difo difo"']
for q in qs:
    ix.count(q)
    ix.facets(q)
    ix.count_and_facets(q)
res = {"apart": [], "together": []}
for rep in range(4):
    order = ("apart", "together") if rep % 2 == 0 else ("together", "apart")
    for how in order:
        for q in qs:
            t = time.perf_counter()
            if how == "apart":
                a = (ix.count(q), ix.facets(q))
            else:
                a = ix.count_and_facets(q)
            res[how].append((time.perf_counter() - t) * 1e3)
for k, v in res.items():
    print(k, "p50 %.1f ms, max %.1f ms, n %d" % (statistics.median(v), max(v), len(v)))
print([ (q, ix.count(q)) for q in qs])
