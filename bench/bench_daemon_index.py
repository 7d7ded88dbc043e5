#!/usr/bin/env python3
"""The daemon's index against a one-shot ``indexerd index`` of the same tree (issue 31): how many
segments each holds and how fast each answers, right after the daemon's first pass and once its
idle maintenance has run.

  bench_daemon_index.py [--files 10000] [--engine whoosh] [--reps 3] [--settle 120] [--work DIR]
                        [--merge-idle 10m]

The tree is bench/gen_corpus.py's (N plain-text files, 1-20 KiB).  One-shot: ``indexerd index``
into a state dir of its own.  Daemon: ``indexerd run`` on a config with the same tree, from an
empty state dir; its first pass is over when ``status`` says the source is not running and the
store counts N documents.  Queries: run_all.py's 12 for the generated trees, limit 20 (snippets
included), in this process on the index opened read-only beside the running daemon, one warm-up
round then ``--reps`` rounds; p50 and p95 of the single query times.  The daemon's index is
measured right after its first pass, then every few seconds until its segment count has not
changed for ``--settle`` seconds (the idle merges are done), and once more at the end.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from benchlib import PY, daemon_status, measure, median, p95  # noqa: E402
from run_all import SCALE_QUERIES, query_alone  # noqa: E402


def config(work: Path, tag: str, tree: Path, engine: str, merge_idle: str | None = None) -> Path:
    cfg = work / f"{tag}.toml"
    whoosh = f'[index.whoosh]\nmerge_idle = "{merge_idle}"\n' if merge_idle and engine == "whoosh" else ""
    cfg.write_text(f'state_dir = "{work / tag}"\ncontrol_socket = "{work}/{tag}.sock"\nlog_level = "warning"\n'
                   f'[index]\nengine = "{engine}"\n{whoosh}'
                   f'[[sources.filesystem]]\nname = "docs"\npath = "{tree}"\n')
    return cfg


def query_times(state: Path, queries: list[str], reps: int) -> dict:
    """p50 / p95 of the queries in this process (run_all.py's ``query_alone``), the segments and
    the index's size."""
    from indexerd.index import open_index

    times = query_alone(str(state), queries, reps)
    ix = open_index(state, create=False)
    try:
        st = ix.status()
    finally:
        ix.close()
    return {"p50_ms": round(median(times) * 1000, 1), "p95_ms": round(p95(times) * 1000, 1),
            "segments": st.get("segments"), "size_mb": round((st.get("size_bytes") or 0) / 1e6, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--engine", default="whoosh")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--settle", type=float, default=120.0)
    ap.add_argument("--work", default=None)
    ap.add_argument("--merge-idle", default=None, help='the daemon\'s [index.whoosh] merge_idle (default "10m")')
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-daemonix-"))
    work.mkdir(parents=True, exist_ok=True)
    tree = work / f"tree{a.files}"
    subprocess.run([PY, str(HERE / "gen_corpus.py"), str(tree), str(a.files)], check=True)
    queries = list(SCALE_QUERIES)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out: dict = {"files": a.files, "engine": a.engine, "queries": queries}

    shutil.rmtree(work / "oneshot", ignore_errors=True)
    cfg = config(work, "oneshot", tree, a.engine)
    m = measure([PY, "-m", "indexerd.cli.main", "-c", str(cfg), "index"], env=env, cwd=REPO)
    if m["rc"] != 0:
        raise SystemExit(m["stderr"][-2000:])
    out["oneshot"] = {"wall_s": round(m["wall"], 1), "peak_mb": round(m["peak_rss_mb"]),
                      **query_times(work / "oneshot", queries, a.reps)}
    print("one-shot:", out["oneshot"], file=sys.stderr, flush=True)

    shutil.rmtree(work / "daemon", ignore_errors=True)
    cfg = config(work, "daemon", tree, a.engine, a.merge_idle)
    sock = str(work / "daemon.sock")
    t0 = time.monotonic()
    proc = subprocess.Popen([PY, "-m", "indexerd.cli.main", "-c", str(cfg), "run"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timeline = []
    try:
        while True:
            time.sleep(0.5)
            if proc.poll() is not None:
                raise SystemExit(proc.stderr.read().decode()[-2000:])
            try:
                st = daemon_status(sock)
            except OSError:
                continue
            src = st["sources"]["docs"]
            if not src["running"] and src["documents"].get("indexed", 0) >= a.files and \
                    st["writer"]["queue"] == 0 and st["writer"]["last_commit"]:
                break
        first_pass = time.monotonic() - t0
        row = {"at_s": round(first_pass, 1), **query_times(work / "daemon", queries, a.reps)}
        timeline.append(row)
        print("daemon, first pass over:", row, file=sys.stderr, flush=True)
        last_change, last_segments = time.monotonic(), row["segments"]
        while time.monotonic() - last_change < a.settle:
            time.sleep(5)
            segs = daemon_status(sock)["index"]["segments"]
            if segs != last_segments:
                last_change, last_segments = time.monotonic(), segs
                row = {"at_s": round(time.monotonic() - t0, 1), **query_times(work / "daemon", queries, a.reps)}
                timeline.append(row)
                print("daemon:", row, file=sys.stderr, flush=True)
        row = {"at_s": round(time.monotonic() - t0, 1), **query_times(work / "daemon", queries, a.reps)}
        timeline.append(row)
        print("daemon, settled:", row, file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    out["daemon"] = {"first_pass_s": round(first_pass, 1), "timeline": timeline}
    print(json.dumps(out, indent=1))
    o = out["oneshot"]
    print(f"\n| index of {a.files:,} files ({a.engine}) | segments | size | query p50 | query p95 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| one-shot `indexerd index` ({o['wall_s']} s) | {o['segments']} | {o['size_mb']} MB | {o['p50_ms']} ms | "
          f"{o['p95_ms']} ms |")
    for r in timeline:
        print(f"| daemon, {r['at_s']} s after its start | {r['segments']} | {r['size_mb']} MB | {r['p50_ms']} ms | "
              f"{r['p95_ms']} ms |")


if __name__ == "__main__":
    main()
