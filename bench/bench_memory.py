#!/usr/bin/env python3
"""Peak memory of a first index, process by process: `indexerd index` and the daemon's first
pass on each engine, beside Recoll at the same priority (issues 29 and 31).

  bench_memory.py TREE [--runs tantivy-index,tantivy-daemon,whoosh-index,whoosh-daemon,recoll]
                  [--code LABEL=PATH ...] [--reps 2] [--work DIR]

Each run starts from an empty state dir with a config of the bench's own (``control_socket``
set).  A daemon's run ends when ``status`` says its source is not running, has finished a pass,
and the writer's queue is empty; then it is stopped.  Recoll runs ``recollindex`` with
benchlib's recoll.conf (``idxniceprio = 0``).  ``--code`` runs indexerd's runs once per
checkout (PYTHONPATH; the venv is this interpreter's), for a before/after in the same run;
``RUN@LABEL`` runs that one with checkout LABEL only.
Every 50 ms the process tree is read from /proc: the largest process's RSS (and its anonymous
and file-backed parts at that moment: tantivy maps its segment files, so pages its merges read
count in its RSS while mapped), the largest anonymous RSS of any process, and the sum of the
tree's RSS.  The order of the runs is reversed at every repetition.  Prints one JSON line per
run and a Markdown table of medians.
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
sys.path.insert(0, str(HERE))
from benchlib import PY, RECOLL_CONF, _children, daemon_status  # noqa: E402


def proc_mem_mb(pid: int) -> tuple[float, float, float] | None:
    """(VmRSS, RssAnon, RssFile) of ``pid`` in MB (2^20 bytes), None when it is gone."""
    f = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                f[k] = int(v.split()[0]) / 1024
    except OSError:
        return None
    return f.get("VmRSS", 0.0), f.get("RssAnon", 0.0), f.get("RssFile", 0.0)


class Sampler:
    """Peaks over the samples of one process tree (see the module docstring)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.largest = (0.0, 0.0, 0.0)  # (rss, anon, file) of the largest process at its peak
        self.anon = 0.0
        self.tree = 0.0
        self.cpu_ticks: dict[int, int] = {}

    def sample(self) -> None:
        stack, total = [self.root], 0.0
        while stack:
            p = stack.pop()
            m = proc_mem_mb(p)
            if m is not None:
                total += m[0]
                if m[0] > self.largest[0]:
                    self.largest = m
                self.anon = max(self.anon, m[1])
                try:
                    fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
                    self.cpu_ticks[p] = int(fields[11]) + int(fields[12])
                except (OSError, IndexError, ValueError):
                    pass
            stack += _children(p)
        self.tree = max(self.tree, total)

    def result(self) -> dict:
        return {"largest_mb": round(self.largest[0]), "largest_anon_mb": round(self.largest[1]),
                "largest_file_mb": round(self.largest[2]), "max_anon_mb": round(self.anon),
                "tree_sum_mb": round(self.tree),
                "cpu_s": round(sum(self.cpu_ticks.values()) / os.sysconf("SC_CLK_TCK"), 1)}


def first_pass_over(sock: str) -> bool:
    try:
        st = daemon_status(sock)
    except (OSError, ValueError):
        return False
    src = st["sources"]["docs"]
    return (not src["running"] and bool((src.get("last_run") or {}).get("finished"))
            and st["writer"]["queue"] == 0 and bool(st["writer"]["last_commit"]))


def run(cmd: list[str], env: dict | None, cwd: str, done=None) -> dict:
    """Run ``cmd`` until it exits (or, with ``done``, until ``done()`` says so: then SIGTERM)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    s = Sampler(p.pid)
    last_check = 0.0
    while p.poll() is None:
        s.sample()
        now = time.perf_counter()
        if done is not None and now - last_check > 0.5:
            last_check = now
            if done():
                break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if p.poll() is None:
        p.terminate()
        p.wait(120)
    elif p.returncode != 0:
        raise RuntimeError(f"{cmd} exited {p.returncode}: {p.stderr.read().decode()[-2000:]}")
    return {"wall_s": round(wall, 1), **s.result()}


def indexerd_run(engine: str, mode: str, code: str, tree: str, work: Path, tag: str) -> dict:
    state = work / tag
    shutil.rmtree(state, ignore_errors=True)
    sock = str(work / f"{tag}.sock")
    cfg = work / f"{tag}.toml"
    cfg.write_text(f'state_dir = "{state}"\ncontrol_socket = "{sock}"\nlog_level = "warning"\n'
                   f'[index]\nengine = "{engine}"\n[[sources.filesystem]]\nname = "docs"\npath = "{tree}"\n')
    env = {**os.environ, "PYTHONPATH": code, "PYTHONDONTWRITEBYTECODE": "1"}
    verb = "index" if mode == "index" else "run"
    out = run([PY, "-m", "indexerd.cli.main", "-c", str(cfg), verb], env, code,
              done=None if mode == "index" else (lambda: first_pass_over(sock)))
    shutil.rmtree(state, ignore_errors=True)
    return out


def recoll_run(tree: str, work: Path) -> dict:
    conf = work / "recoll-conf"
    shutil.rmtree(conf, ignore_errors=True)
    conf.mkdir(parents=True)
    (conf / "recoll.conf").write_text(RECOLL_CONF.format(tree=tree, conf=conf))
    out = run(["recollindex", "-c", str(conf)], None, str(conf))
    shutil.rmtree(conf, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree")
    ap.add_argument("--runs", default="tantivy-index,tantivy-daemon,whoosh-index,whoosh-daemon,recoll")
    ap.add_argument("--code", action="append", default=[], help="LABEL=PATH of a checkout (default: this one)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    codes = dict(c.split("=", 1) for c in a.code) or {"this": str(HERE.parent)}
    plan = []
    for r in a.runs.split(","):
        if r == "recoll":
            plan.append(("recoll", None))
        else:  # "whoosh-index@LABEL": that checkout only
            r, _, only = r.partition("@")
            plan += [(r, label) for label in codes if not only or label == only]
    results: dict = {}
    for rep in range(a.reps):
        for what, label in (plan if rep % 2 == 0 else plan[::-1]):
            load = os.getloadavg()[0]
            if what == "recoll":
                m = recoll_run(a.tree, work)
            else:
                engine, mode = what.split("-")
                m = indexerd_run(engine, mode, codes[label], a.tree, work, f"{what}-{label}")
            name = what if label is None else f"{what} ({label})"
            m.update(run=name, rep=rep + 1, load=round(load, 1))
            print(json.dumps(m), flush=True)
            results.setdefault(name, []).append(m)
    print("\n| run | wall | largest process (anon + file) | largest anonymous | sum of the tree | CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, ms in results.items():
        def both(k):
            return " / ".join(str(m[k]) for m in ms)
        largest = " / ".join(f"{m['largest_mb']} ({m['largest_anon_mb']} + {m['largest_file_mb']})" for m in ms)
        print(f"| {name} | {both('wall_s')} s | {largest} MB | {both('max_anon_mb')} MB | {both('tree_sum_mb')} MB "
              f"| {both('cpu_s')} s |")


if __name__ == "__main__":
    main()
