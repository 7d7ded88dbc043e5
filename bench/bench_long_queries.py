#!/usr/bin/env python3
"""Long queries against one index, in this process: the seconds ``search_any_engine`` takes for a
query of N generated words (``event0 loop1 python2 ...``, most of them unknown to the index, so
'did you mean' runs), or the error it raises.  Run it once per code tree (PYTHONPATH) to compare.

    PYTHONPATH=TREE bench/bench_long_queries.py STATE_DIR [N ...]
"""

from __future__ import annotations

import sys
import time

from indexerd.daemon import queries as Q
from indexerd.index.opening import open_index

WORDS = ["event", "loop", "python", "file", "data", "the", "error", "system"]


def main() -> None:
    ix = open_index(sys.argv[1], create=False)
    for n in [int(a) for a in sys.argv[2:]] or [10, 100, 1000]:
        q = " ".join(f"{WORDS[i % 8]}{i % 50}" for i in range(n))
        t = time.perf_counter()
        try:
            r = Q.search_any_engine(ix, Q.SearchRequest(query=q, limit=1))
            what = f"{r.total} hits, suggestion {'yes' if r.suggestion else 'no'}"
        except Exception as e:  # the figure is the error and the time it took
            what = f"{type(e).__name__}: {str(e)[:70]}"
        print(f"{n} words: {time.perf_counter() - t:.2f} s  {what}", flush=True)
    ix.close()


if __name__ == "__main__":
    main()
