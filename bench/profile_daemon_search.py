#!/usr/bin/env python3
"""Issue 31: the daemon's part of ``ctl search``, in process, on one index (any engine).

  profile_daemon_search.py STATE_DIR [--reps 2] [--profile cumulative|tottime]

``search_any_engine`` as the daemon's query runner calls it for ``ctl search Q --limit 20``
(exact: no count; identical documents collapsed with the state store's content hashes, the store
opened per query as the daemon does), for each of run_all.py's ``SCALE_QUERIES``: one warm-up
round, then ``REPS`` rounds, each query timed alone in thread CPU time (steadier than wall time
on a loaded machine; the search runs in this thread).  Prints the p50 and the largest time, each
query's median, and with ``--profile`` a cProfile of one more round (the first 30 functions by
that order).  Run it with ``PYTHONPATH`` set to the checkout to measure (main, a branch).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_all import SCALE_QUERIES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("state_dir")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--profile", choices=("cumulative", "tottime"), default=None)
    a = ap.parse_args()

    from indexerd.core.store import open_store_in_dir
    from indexerd.daemon.queries import SearchRequest, search_any_engine
    from indexerd.index import open_index

    ix = open_index(a.state_dir, create=False)

    def hashes(keys: list[str]) -> dict[str, str]:
        with open_store_in_dir(a.state_dir, readonly=True) as store:
            return store.content_hashes(keys)

    def one(q: str) -> None:
        search_any_engine(ix, SearchRequest(query=q, limit=20), exact=True, hashes=hashes)

    for q in SCALE_QUERIES:
        one(q)
    times: dict[str, list[float]] = {q: [] for q in SCALE_QUERIES}
    for _ in range(a.reps):
        for q in SCALE_QUERIES:
            t = time.thread_time()
            one(q)
            times[q].append(time.thread_time() - t)
    flat = sorted(t for ts in times.values() for t in ts)
    print(f"p50 {statistics.median(flat) * 1e3:.1f} ms  max {flat[-1] * 1e3:.1f} ms  (thread CPU; "
          f"load {open('/proc/loadavg').read().split()[0]})")
    for q, ts in times.items():
        print(f"  {q!r:30s} {statistics.median(ts) * 1e3:7.1f} ms")
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        for q in SCALE_QUERIES:
            one(q)
        pr.disable()
        pstats.Stats(pr).sort_stats(a.profile).print_stats(30)
    ix.close()


if __name__ == "__main__":
    main()
