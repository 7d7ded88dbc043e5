#!/usr/bin/env python3
"""A long run of the daemon under steady edits: do its index segments, open descriptors, memory
and index size stay bounded (issue 29: "a 30-minute soak with edits every 10 s ends with bounded
segments and descriptors"; a 15-minute soak once went from 4 to 111 segments, 34 to 460 fds).

Generates a tree of FILES small text files, starts ``indexerd run`` on it (default settings: the
Whoosh engine, ``merge_idle = 10m``), waits for the first pass, then for DURATION seconds every
EVERY seconds edits one file (append a fresh word; every 5th step a new file, every 7th a
deletion) and checks the previous edit is searchable.  Once a minute it samples, from the
daemon's ``ctl status --json`` and ``/proc``: segments, index bytes, open descriptors, RSS.

Usage: bench/bench_soak.py [--minutes 30] [--every 10] [--files 3000] [--engine whoosh]
Prints a markdown table (a row every 5 minutes and the last) and the verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable
#: the daemon and ``ctl`` never read the machine's /etc/indexerd or a service's directories
ENV = {k: v for k, v in os.environ.items()
       if k not in ("INDEXERD_CONFIG", "STATE_DIRECTORY", "RUNTIME_DIRECTORY", "NOTIFY_SOCKET", "WATCHDOG_USEC")}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ctl(cfg: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "indexerd.cli.main", "ctl", *args, "-c", str(cfg)],
                          capture_output=True, text=True, env=ENV, timeout=timeout)


def status(cfg: Path) -> dict | None:
    p = ctl(cfg, "status", "--json")
    return json.loads(p.stdout) if p.returncode == 0 else None


def hits(cfg: Path, word: str) -> int:
    p = ctl(cfg, "search", word, "--json", "--limit", "5")
    return len(json.loads(p.stdout)) if p.returncode == 0 else -1


def proc_figures(pid: int) -> tuple[int, float]:
    """(open descriptors, RSS in MB) of the process."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS")) / 1024
    return fds, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between two edits")
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--engine", default="whoosh", choices=("whoosh", "tantivy"))
    a = ap.parse_args()
    rng = random.Random(29)
    base = Path(tempfile.mkdtemp(prefix="ixsoak"))
    tree = base / "tree"
    vocab = [f"w{i:04d}" for i in range(5000)]
    log(f"generating {a.files} files in {tree}")
    for i in range(a.files):
        d = tree / f"d{i // 200:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_text(" ".join(rng.choices(vocab, k=80)) + "\n", encoding="utf-8")
    cfg = base / "indexerd.toml"
    cfg.write_text(f'state_dir = "{base / "state"}"\ncontrol_socket = "{base / "ctl.sock"}"\n'
                   f'log_level = "info"\n\n[index]\nengine = "{a.engine}"\n\n'
                   f'[[sources.filesystem]]\nname = "soak"\npath = "{tree}"\n', encoding="utf-8")
    logf = open(base / "daemon.log", "wb")
    proc = subprocess.Popen([PY, "-m", "indexerd.cli.main", "run", "-c", str(cfg)], env=ENV,
                            stdout=logf, stderr=subprocess.STDOUT)
    samples: list[dict] = []
    missed: list[str] = []
    try:
        t0 = time.monotonic()
        while True:
            st = status(cfg)
            if st and st["sources"]["soak"].get("last_run") and not st["sources"]["soak"]["running"]:
                break
            if proc.poll() is not None or time.monotonic() - t0 > 600:
                raise SystemExit(f"the daemon did not finish its first pass; see {base / 'daemon.log'}")
            time.sleep(1)
        log(f"first pass done in {time.monotonic() - t0:.0f} s; soaking {a.minutes:g} min, an edit every {a.every:g} s")
        files = sorted(tree.rglob("*.txt"))
        start = time.monotonic()
        end = start + a.minutes * 60
        step, last_word, next_sample = 0, None, start
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                st = status(cfg) or {}
                fds, rss = proc_figures(proc.pid)
                ix = st.get("index", {})
                samples.append({"minute": round((now - start) / 60, 1), "segments": ix.get("segments"),
                                "index_mb": round((ix.get("size_bytes") or 0) / 1e6, 1), "fds": fds,
                                "rss_mb": round(rss), "documents": ix.get("documents")})
                s = samples[-1]
                log(f"  min {s['minute']:5.1f}: segments {s['segments']}, index {s['index_mb']} MB, "
                    f"fds {fds}, RSS {rss:.0f} MB, documents {s['documents']}")
                next_sample += 60
            if last_word is not None and hits(cfg, last_word) < 1:
                missed.append(last_word)  # not searchable after `every` seconds
            step += 1
            last_word = f"soakedit{step:05d}"
            if step % 7 == 0 and len(files) > 10:
                files.pop(rng.randrange(len(files))).unlink()
                last_word = None
            elif step % 5 == 0:
                new = tree / "new" / f"n{step:05d}.txt"
                new.parent.mkdir(exist_ok=True)
                new.write_text(f"fresh file {last_word}\n", encoding="utf-8")
                files.append(new)
            else:
                with open(rng.choice(files), "a", encoding="utf-8") as fh:
                    fh.write(f" {last_word}\n")
            time.sleep(max(0.0, a.every - (time.monotonic() - now)))
        st = status(cfg) or {}
        fds, rss = proc_figures(proc.pid)
        ix = st.get("index", {})
        samples.append({"minute": round((time.monotonic() - start) / 60, 1), "segments": ix.get("segments"),
                        "index_mb": round((ix.get("size_bytes") or 0) / 1e6, 1), "fds": fds, "rss_mb": round(rss),
                        "documents": ix.get("documents")})
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        logf.close()
    print(f"\n{a.minutes:g}-minute soak, {a.engine}, {a.files} files, an edit every {a.every:g} s "
          f"({step} edits; {len(missed)} not searchable {a.every:g} s later)\n")
    print("| minute | segments | index MB | open fds | RSS MB | documents |\n| ---: | ---: | ---: | ---: | ---: | ---: |")
    for s in samples:
        if s is samples[-1] or s is samples[0] or int(s["minute"]) % 5 == 0:
            print(f"| {s['minute']} | {s['segments']} | {s['index_mb']} | {s['fds']} | {s['rss_mb']} | {s['documents']} |")
    half = [s for s in samples if s["minute"] >= a.minutes / 2]
    first = [s for s in samples if s["minute"] < a.minutes / 2]

    def peak(rows: list[dict], key: str) -> int:
        return max((r[key] or 0) for r in rows) if rows else 0

    bounded = all(peak(half, k) <= max(peak(first, k), 1) * 1.25 + 2 for k in ("segments", "fds"))
    print(f"\nsecond half's peak vs first half's: segments {peak(half, 'segments')} vs {peak(first, 'segments')}, "
          f"fds {peak(half, 'fds')} vs {peak(first, 'fds')}, RSS {peak(half, 'rss_mb')} vs {peak(first, 'rss_mb')} MB: "
          f"{'bounded' if bounded else 'GROWING'}")
    if missed:
        print(f"not searchable {a.every:g} s after the edit: {missed[:10]}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
