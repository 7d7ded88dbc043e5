#!/usr/bin/env python3
"""Edit-to-searchable latency of the running daemon, and its memory while watching a tree.

Indexes TREE once (`indexerd index`), starts `indexerd run` on it with default settings, waits for
the start-up reconcile, then makes N edits (append a fresh word to a random file, one at a time)
and measures for each the time until a fresh searcher finds the word (polled every 10 ms,
in-process, so no process start-up is counted).  Reports median and p95, the daemon's RSS
(VmRSS / VmHWM) while watching, and how many segments the live commits made.
Usage: bench/bench_live.py [TREE] [--edits 50]
"""
from __future__ import annotations

import argparse, json, os, random, shutil, signal, statistics, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def status(env, cfg):
    p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "ctl", "status", "--json", "-c", cfg],
                       capture_output=True, text=True, env=env, timeout=30)
    return json.loads(p.stdout) if p.returncode == 0 else None


def vm(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tree", nargs="?", default=os.path.join(os.environ.get("BENCH_DATA", "/tmp/bench-data"), "docs-fs"))
    ap.add_argument("--edits", type=int, default=50)
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ixdb"))
    tree = base / "tree"
    shutil.copytree(a.tree, tree, symlinks=True)
    cfg = base / "c.toml"
    cfg.write_text(f'state_dir = "{base}/state"\ncontrol_socket = "{base}/s.sock"\nlog_level = "warning"\n'
                   f'[[sources.filesystem]]\nname = "docs"\npath = "{tree}"\n')
    env = dict(os.environ)
    subprocess.run([sys.executable, "-m", "indexerd.cli.main", "index", "-c", str(cfg)], env=env, check=True,
                   capture_output=True, timeout=3600)
    log = open(base / "daemon.log", "w")
    d = subprocess.Popen([sys.executable, "-m", "indexerd.cli.main", "run", "-c", str(cfg)], env=env, stderr=log)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            s = status(env, str(cfg))
            if s and s["sources"]["docs"]["last_run"]["finished"]:
                break
            time.sleep(0.2)
        else:
            sys.exit("daemon did not finish its start-up reconcile")
        from indexerd.index import open_index
        rng = random.Random(11)
        files = sorted(str(p) for p in tree.rglob("*.txt")) or sorted(str(p) for p in tree.rglob("*.html"))
        lat = []
        for i in range(a.edits):
            word = f"liveedit{i:03d}x{rng.randrange(10**6)}"
            f = rng.choice(files)
            t0 = time.perf_counter()
            with open(f, "a") as fh:
                fh.write(f"\n{word}\n")
            while True:
                ix = open_index(base / "state", create=False)
                try:
                    found = ix.search(word, limit=1)
                finally:
                    ix.close()
                if found:
                    lat.append(time.perf_counter() - t0)
                    break
                if time.perf_counter() - t0 > 30:
                    lat.append(float("inf"))
                    break
                time.sleep(0.01)
            time.sleep(0.05)
        s = status(env, str(cfg))
        q95 = sorted(lat)[int(0.95 * (len(lat) - 1))]
        res = {"tree": a.tree, "files": len(list(tree.rglob("*"))), "edits": len(lat),
               "latency_median_s": round(statistics.median(lat), 3), "latency_p95_s": round(q95, 3),
               "latency_max_s": round(max(lat), 3),
               "daemon_rss_mb": round(vm(d.pid, "VmRSS:")), "daemon_peak_rss_mb": round(vm(d.pid, "VmHWM:")),
               "segments": s["index"]["segments"], "commits": s["writer"]["commits"]}
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=30)
        log.close()
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / f"live-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
