#!/usr/bin/env python3
"""Issue 31 (1): a tree of 1,000,000 small files on the tantivy engine.

  bench_million_files.py [--root /work/bench-data/million] [--files 1000000] [--reps 2]
                         [--edits 10] [--skip-first] [--only first,unchanged,daemon]

generate   (once; kept while ROOT.done matches) N text files of 200-600 bytes under
           ROOT/dNN/dNNN/fNNNNNNN.txt, 1,000 per leaf directory: a title line ``note I`` and
           lines of words from bench/gen_corpus.py's 30,000-word vocabulary (Zipf-like), so the
           scale queries hit; every file and directory gets mtime 2024-01-01 UTC.
first      ``indexerd index --json`` from an empty state dir (config of the bench's own,
           ``[index] engine = "tantivy"``, never /etc/indexerd): wall, CPU, peak memory of the
           process tree (bench/benchlib.py ``measure``).
unchanged  ``indexerd index --json`` again, alternating with the floor (a bare ``os.scandir``
           walk + ``stat`` of every file in a separate process), REPS times each, the order
           rotated every repetition: the whole command, the pass as indexerd times it, the floor.
           ``--code NAME=REPO`` (repeatable): each checkout's code in turn (``PYTHONPATH``).
daemon     ``indexerd run`` on the same state (control_socket set): the time until its start-up
           reconcile of the tree is over and its peak memory then; EDITS edits (a new file with a
           new unique word, in a leaf directory of the tree) timed until ``indexerd ctl search``
           finds it (p50, max); the new files are removed at the end.
Progress goes to stderr; a markdown table to stdout and bench/out/million-<time>.{json,md}.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from benchlib import PY, _tree_mem_kb, measure  # noqa: E402
from gen_corpus import vocabulary  # noqa: E402

MTIME = 1704067200  # 2024-01-01 00:00:00 UTC
PER_DIR = 1000
PARAMS_VERSION = 1


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def rel_path(i: int) -> str:
    """Path of file ``i`` under the root: 100 leaf directories of 1,000 files per top directory."""
    return f"d{i // 100_000:02d}/d{(i // PER_DIR) % 100:03d}/f{i:07d}.txt"


def generate(root: Path, n: int, seed: int = 1) -> dict:
    """Write the tree (plain os calls); kept when ``ROOT.done`` holds the same parameters.
    Returns the .done record: params, files, bytes, gen_seconds."""
    params = {"n": n, "seed": seed, "version": PARAMS_VERSION}
    done = root.with_name(root.name + ".done")
    if done.exists() and root.is_dir():
        try:
            info = json.loads(done.read_text())
            if info["params"] == params:
                return info
        except (ValueError, KeyError):
            pass
    if root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=True)
    done.unlink(missing_ok=True)
    t0 = time.perf_counter()
    vocab = vocabulary(seed)
    rng = random.Random(seed + 7)
    cum = list(itertools.accumulate(1.0 / (r + 1) ** 1.07 for r in range(len(vocab))))
    words = rng.choices(vocab, cum_weights=cum, k=2_000_000)
    pool = " ".join(words)
    plen = len(pool) - 1000
    total = 0
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    dfd = -1  # the current leaf directory, files opened relative to it
    for i in range(n):
        if i % PER_DIR == 0:
            d = root / os.path.dirname(rel_path(i))
            d.mkdir(parents=True, exist_ok=True)
            if dfd >= 0:
                os.close(dfd)
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        size = rng.randint(200, 600)
        off = pool.find(" ", rng.randrange(plen)) + 1
        end = pool.find(" ", off + size)
        body = (f"note {i} {rng.choice(vocab)} {rng.choice(vocab)}\n" + pool[off:end] + "\n").encode()
        fd = os.open(f"f{i:07d}.txt", flags, 0o644, dir_fd=dfd)
        os.write(fd, body)
        os.close(fd)
        total += len(body)
        if (i + 1) % 50_000 == 0:
            rate = (i + 1) / (time.perf_counter() - t0)
            log(f"generate: {i + 1:,} / {n:,} files ({rate:,.0f}/s, eta {(n - i - 1) / rate:.0f} s)")
    os.close(dfd)
    log("generate: setting mtimes")
    for dirpath, dirs, files in os.walk(root, topdown=False):
        for f in files:
            os.utime(os.path.join(dirpath, f), (MTIME, MTIME))
        os.utime(dirpath, (MTIME, MTIME))
    info = {"params": params, "files": n, "bytes": total, "gen_seconds": round(time.perf_counter() - t0, 1)}
    done.write_text(json.dumps(info))
    return info


FLOOR_CODE = """
import os, sys, time
t = time.perf_counter(); n = 0; stack = [sys.argv[1]]
while stack:
    with os.scandir(stack.pop()) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            else:
                e.stat(follow_symlinks=False); n += 1
print(n, time.perf_counter() - t)
"""


def floor_run() -> dict:
    """The bare walk in a process of its own: files seen, the walk's seconds, the process's wall."""
    t = time.perf_counter()
    p = subprocess.run([PY, "-c", FLOOR_CODE, ARGS.root], capture_output=True, text=True, check=True)
    n, secs = p.stdout.split()
    return {"files": int(n), "walk_s": float(secs), "wall": time.perf_counter() - t}


def config(work: Path, root: Path) -> Path:
    """The bench's own config (never /etc/indexerd): tantivy, one tree, a control socket."""
    cfg = work / "million.toml"
    cfg.write_text(f'state_dir = "{work / "state"}"\ncontrol_socket = "{work / "ctl.sock"}"\n'
                   f'log_level = "warning"\n[index]\nengine = "tantivy"\n'
                   f'[[sources.filesystem]]\nname = "million"\npath = "{root}"\n')
    return cfg


ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO)}


def index_once(cfg: Path, repo: Path = REPO) -> dict:
    """``indexerd index --json`` of checkout ``repo`` (``PYTHONPATH``) measured (benchlib
    ``measure``), with its summary merged in."""
    m = measure([PY, "-m", "indexerd.cli.main", "-c", str(cfg), "index", "--json"],
                env={**ENV, "PYTHONPATH": str(repo)}, cwd=repo, poll=0.5)
    if m["rc"] != 0:
        raise SystemExit(f"indexerd index exited {m['rc']}: {m['stderr'][-3000:]}")
    s = json.loads(m.pop("stdout").strip().splitlines()[-1])
    m.pop("stderr")
    # a short run can end between two polls: the largest process's own high-water mark then
    m["peak_mb"] = max(m["peak_rss_mb"], m["maxrss_one_mb"])
    m.update({k: s.get(k) for k in ("elapsed_seconds", "seen", "indexed", "unchanged", "deleted", "errors", "skipped")})
    return m


def ctl(cfg: Path, *words: str, timeout: float = 120) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(PY), "indexerd")
    return subprocess.run([exe, "-c", str(cfg), "ctl", *words], env=ENV, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def vm_kb(pid: int, key: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def daemon(cfg: Path, work: Path, root: Path, n: int, edits: int) -> dict:
    """``indexerd run``: start-up reconcile time and peak memory, then ``edits`` edits timed
    until ``indexerd ctl search`` finds each one's word."""
    out: dict = {}
    logf = open(work / "daemon.log", "w")
    started_at = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    t0 = time.perf_counter()
    d = subprocess.Popen([PY, "-m", "indexerd.cli.main", "-c", str(cfg), "run"], env=ENV, cwd=REPO,
                         stdout=logf, stderr=subprocess.STDOUT)
    created: list[Path] = []
    peak_tree = 0
    try:
        last_log = 0.0
        while True:
            if d.poll() is not None:
                raise SystemExit(f"the daemon exited {d.returncode}: see {work / 'daemon.log'}")
            peak_tree = max(peak_tree, _tree_mem_kb(d.pid)[0])
            p = ctl(cfg, "status", "--json")
            if p.returncode == 0:
                src = json.loads(p.stdout)["sources"]["million"]
                last = src.get("last_run") or {}
                # the daemon's own pass, not the last `indexerd index` the store remembers
                if not src["running"] and last.get("finished") and last.get("started", "") >= started_at:
                    break
            if time.perf_counter() - last_log > 30:
                last_log = time.perf_counter()
                log(f"daemon: start-up reconcile running, {time.perf_counter() - t0:.0f} s, "
                    f"{vm_kb(d.pid, 'VmRSS:') / 1024:.0f} MB")
            time.sleep(1)
        out["reconcile_s"] = round(time.perf_counter() - t0, 1)
        out["reconcile_last_run"] = src.get("last_run")
        out["peak_after_reconcile_mb"] = round(vm_kb(d.pid, "VmHWM:") / 1024)
        out["rss_after_reconcile_mb"] = round(vm_kb(d.pid, "VmRSS:") / 1024)
        out["tree_peak_polled_mb"] = round(max(peak_tree, _tree_mem_kb(d.pid)[0]) / 1024)
        log(f"daemon: reconcile over in {out['reconcile_s']} s: {out}")
        rng = random.Random(31)
        lat, cmd_s = [], []
        for k in range(edits):
            word = "millionedit" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))
            i = rng.randrange(n)
            f = root / os.path.dirname(rel_path(i)) / f"edit-{k:02d}-{word}.txt"
            created.append(f)
            t = time.perf_counter()
            f.write_text(f"live edit {k}\n{word}\n")
            while True:
                tq = time.perf_counter()
                p = ctl(cfg, "search", word, "--json", "--limit", "1")
                cmd_s.append(time.perf_counter() - tq)
                if p.returncode == 0 and json.loads(p.stdout):
                    lat.append(time.perf_counter() - t)
                    break
                if time.perf_counter() - t > 120:
                    lat.append(float("inf"))
                    break
                time.sleep(0.02)
            log(f"daemon: edit {k + 1}/{edits} searchable after {lat[-1]:.3f} s")
            time.sleep(0.5)
        out["edits"] = len(lat)
        out["edit_p50_s"] = round(statistics.median(lat), 3)
        out["edit_max_s"] = round(max(lat), 3)
        out["ctl_search_p50_s"] = round(statistics.median(cmd_s), 3)
        out["peak_end_mb"] = round(vm_kb(d.pid, "VmHWM:") / 1024)
        out["rss_end_mb"] = round(vm_kb(d.pid, "VmRSS:") / 1024)
    finally:
        for f in created:
            f.unlink(missing_ok=True)
        d.terminate()
        try:
            d.wait(timeout=300)
        except subprocess.TimeoutExpired:
            d.kill()
        logf.close()
    return out


def machine() -> str:
    return f"{os.cpu_count()} cores, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


ARGS: argparse.Namespace


def main() -> None:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/work/bench-data/million")
    ap.add_argument("--work", default=None, help="state and config (default ROOT-work)")
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--skip-first", action="store_true", help="keep WORK's state from an earlier run")
    ap.add_argument("--code", action="append", default=[], metavar="NAME=REPO",
                    help="unchanged phase: time each checkout's `indexerd index` (PYTHONPATH), in turn with "
                         "the floor (default: this one)")
    ap.add_argument("--only", default="first,unchanged,daemon", help="phases to run (comma-separated)")
    ARGS = args = ap.parse_args()
    root = Path(args.root)
    work = Path(args.work or str(root) + "-work")
    work.mkdir(parents=True, exist_ok=True)
    phases = args.only.split(",")
    started = datetime.now(timezone.utc)
    res: dict = {"started": started.isoformat(timespec="seconds"), "machine_at_start": machine(),
                 "argv": sys.argv[1:]}
    log(f"generate: {args.files:,} files under {root} ({machine()})")
    res["tree"] = generate(root, args.files)
    log(f"tree: {res['tree']}")
    cfg = config(work, root)
    subprocess.run(["cat", str(cfg)], stdout=sys.stderr)
    floor_run()  # warm the dentry and inode caches before anything is timed
    if "first" in phases and not args.skip_first:
        subprocess.run(["rm", "-rf", str(work / "state")], check=True)
        log("first index: indexerd index from an empty state dir")
        m = index_once(cfg)
        res["first"] = m
        log(f"first index: {m['wall']:.0f} s wall, {m['cpu']:.0f} s CPU, {m['peak_mb']:.0f} MB peak, "
            f"indexed {m['indexed']:,} ({machine()})")
    if "unchanged" in phases:
        codes = dict(c.split("=", 1) for c in args.code) or {"this": str(REPO)}
        for repo in codes.values():  # byte-compiled, as an install is
            subprocess.run([PY, "-m", "compileall", "-q", str(Path(repo) / "indexerd")], check=True)
        rows = []
        whats = ["floor", *codes]
        for rep in range(args.reps):
            order = whats[rep % len(whats):] + whats[:rep % len(whats)]  # each first in turn
            row = {}
            for what in order:
                if what == "floor":
                    row["floor"] = floor_run()
                    log(f"unchanged rep {rep + 1}: floor {row['floor']}")
                else:
                    m = index_once(cfg, Path(codes[what]))
                    row[f"index:{what}"] = m
                    row.setdefault("index", m)
                    log(f"unchanged rep {rep + 1}: {what}: indexerd index {m['wall']:.1f} s wall, pass "
                        f"{m['elapsed_seconds']} s, {m['peak_mb']:.0f} MB, unchanged {m['unchanged']:,}")
            for name in codes:
                m = row[f"index:{name}"]
                log(f"unchanged rep {rep + 1}: {name}: pass / floor walk {m['elapsed_seconds']} / "
                    f"{row['floor']['walk_s']:.2f} s = {float(m['elapsed_seconds']) / row['floor']['walk_s']:.2f}x, "
                    f"command / floor process {m['wall'] / row['floor']['wall']:.2f}x")
            rows.append(row)
        res["unchanged"] = rows
    if "daemon" in phases:
        log("daemon: indexerd run on the indexed state")
        res["daemon"] = daemon(cfg, work, root, args.files, args.edits)
    res["machine_at_end"] = machine()
    res["ended"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    md = table(res)
    (HERE / "out").mkdir(exist_ok=True)
    stem = HERE / "out" / f"million-{started:%Y%m%d-%H%M%S}"
    stem.with_suffix(".json").write_text(json.dumps(res, indent=1))
    stem.with_suffix(".md").write_text(md)
    print(md)


def table(res: dict) -> str:
    """The markdown table of one run's results."""
    n = res["tree"]["files"]
    lines = [f"tree: {n:,} files, {res['tree']['bytes'] / 1e6:.0f} MB; {res['started']} -> {res['ended']}; "
             f"{res['machine_at_start']} -> {res['machine_at_end']}", "",
             "| metric | value |", "| --- | ---: |"]
    if "first" in res:
        f = res["first"]
        lines += [f"| first index: wall | {f['wall']:.0f} s ({n / f['wall']:,.0f} files/s) |",
                  f"| first index: CPU | {f['cpu']:.0f} s |",
                  f"| first index: peak memory, process tree | {f['peak_mb']:.0f} MB |",
                  f"| first index: indexed / errors | {f['indexed']:,} / {f['errors']} |"]
    if "unchanged" in res:
        for k, r in enumerate(res["unchanged"]):
            fl, ix = r["floor"], r["index"]
            lines += [f"| unchanged, rep {k + 1}: whole command / floor process | {ix['wall']:.1f} s / "
                      f"{fl['wall']:.1f} s = {ix['wall'] / fl['wall']:.2f}x |",
                      f"| unchanged, rep {k + 1}: the pass / the walk | {ix['elapsed_seconds']:.1f} s / "
                      f"{fl['walk_s']:.1f} s = {ix['elapsed_seconds'] / fl['walk_s']:.2f}x |",
                      f"| unchanged, rep {k + 1}: peak memory | {ix['peak_mb']:.0f} MB |"]
    if "daemon" in res:
        d = res["daemon"]
        lines += [f"| daemon: start-up reconcile (from start to status finished) | {d['reconcile_s']} s |",
                  f"| daemon: peak RSS after it (VmHWM) / process tree polled | {d['peak_after_reconcile_mb']} MB / "
                  f"{d['tree_peak_polled_mb']} MB |",
                  f"| daemon: edit-to-searchable via `ctl search`, {d['edits']} edits: p50 / max | "
                  f"{d['edit_p50_s']} s / {d['edit_max_s']} s |",
                  f"| daemon: one `ctl search` process, p50 | {d['ctl_search_p50_s']} s |",
                  f"| daemon: peak RSS at the end | {d['peak_end_mb']} MB |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
