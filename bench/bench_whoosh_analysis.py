#!/usr/bin/env python3
"""Whoosh first index and query latency: the old text analysis against the new, same run.

  flock /tmp/indexerd-bench.lock bench_whoosh_analysis.py TREE --old OLD_CHECKOUT [--rounds 3]

TREE: a plain-text tree (bench/gen_corpus.py TREE 10000).  OLD_CHECKOUT: a source tree of
indexerd before the neutral analysis reached Whoosh (``git archive c454f49 | tar -x -C DIR``:
Whoosh's StemmingAnalyzer fused, analysis version 1); ``--new`` is this checkout unless given.  Each round
runs ``indexerd index --json TREE`` on a fresh state dir with each checkout, in alternating
order (old first in even rounds), measured by benchlib.measure (wall, CPU, peak memory of the
process tree), then times bench/run_all.py's SCALE_QUERIES in a fresh process of the same
checkout (limit 20, after one warm-up pass, 3 repetitions).  Prints one JSON object: per
checkout the medians over rounds, and new/old ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from benchlib import du, measure, warm  # noqa: E402
from run_all import SCALE_QUERIES  # noqa: E402

_QUERY_TIMES = """
import json, sys, time
from indexerd.index import open_index
ix = open_index(sys.argv[1], create=False)
queries = json.loads(sys.argv[2])
for q in queries:
    ix.search(q, limit=20)
out = []
for _ in range(3):
    for q in queries:
        t = time.perf_counter(); ix.search(q, limit=20); out.append(time.perf_counter() - t)
print(json.dumps(out))
"""


def run_once(code: Path, tree: str, state: str) -> dict:
    """One first index of ``tree`` by the checkout ``code`` into the fresh state dir ``state``,
    then the query times on it (seconds)."""
    shutil.rmtree(state, ignore_errors=True)
    env = dict(os.environ, STATE_DIRECTORY=state, PYTHONPATH=str(code))
    env.pop("INDEXERD_CONFIG", None)
    m = measure([sys.executable, "-m", "indexerd.cli.main", "index", "--json", tree], env=env, cwd=str(code))
    if m["rc"] != 0:
        raise RuntimeError(f"{code}: indexerd index failed: {m['stderr'][-2000:]}")
    q = subprocess.run([sys.executable, "-c", _QUERY_TIMES, state, json.dumps(SCALE_QUERIES)], env=env,
                       cwd=str(code), capture_output=True, text=True, check=True)
    times = json.loads(q.stdout)
    return {"wall_s": m["wall"], "cpu_s": m["cpu"], "peak_mb": m["peak_rss_mb"],
            "indexed": json.loads(m["stdout"])["indexed"], "index_bytes": du(os.path.join(state, "index")),
            "query_p50_ms": statistics.median(times) * 1000,
            "query_max_ms": max(times) * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("--old", required=True, help="source tree of the old analysis")
    ap.add_argument("--new", default=str(HERE.parent), help="source tree of the new (default: this one)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    codes = {"old": Path(a.old).resolve(), "new": Path(a.new).resolve()}
    warm(a.tree)
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="bench-whoosh-analysis-") as work:
        for r in range(a.rounds):
            for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                got = run_once(codes[name], a.tree, os.path.join(work, name))
                runs[name].append(got)
                print(f"round {r} {name}: {json.dumps(got)}", file=sys.stderr, flush=True)
    med = {name: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for name, rs in runs.items()}
    ratio = {k: med["new"][k] / med["old"][k] for k in med["old"] if med["old"][k]}
    print(json.dumps({"rounds": a.rounds, "median": med, "new_over_old": ratio, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
