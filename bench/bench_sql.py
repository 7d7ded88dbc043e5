#!/usr/bin/env python3
"""The SQL change-queue source: full-load and queue-drain throughput, and queue-to-searchable lag.

On a SQLite file with the example schema (etc/sql-queue-sqlite.sql) and config (etc/sql-sqlite.toml):

1. full load: ROWS rows (default 100,000) of generated text, ~50 words each (a fixed 2,000-word
   vocabulary, seeded), then `indexerd index --json` once (the queue the inserts made is cleared
   first, so the pass is the full load alone).  Rows/s from the wall time of the command and
   from the pass time it reports (`elapsed_seconds`, process start-up excluded).
2. queue drain: CHANGES updates (default 10,000) of random rows, then `indexerd index --json`
   until no row is waiting (batch_size 1000, so about CHANGES/1000 passes).  Rows/s as above.
3. lag: `indexerd run` with interval "1s"; SAMPLES times (default 20): insert a row holding a
   fresh word (the trigger queues it) and poll an in-process searcher every 10 ms until the word
   is found.  Median and p95 of insert-to-searchable.

Prints one JSON object and saves it to bench/out/sql-<timestamp>.json.  Every subprocess and
wait has a timeout.  Usage: bench/bench_sql.py [--rows 100000] [--changes 10000] [--samples 20]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

PASS_TIMEOUT = 1800      # one `indexerd index`
LAG_TIMEOUT = 30         # one insert-to-searchable sample
READY_TIMEOUT = 120      # daemon start-up incl. its first pass


def env() -> dict:
    e = dict(os.environ)
    for k in ("INDEXERD_CONFIG", "STATE_DIRECTORY", "RUNTIME_DIRECTORY", "NOTIFY_SOCKET", "WATCHDOG_USEC"):
        e.pop(k, None)
    return e


def cli(*args: str, timeout: float = PASS_TIMEOUT) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", *args], capture_output=True, text=True,
                       env=env(), cwd=REPO, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"indexerd {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p


def vocabulary(rng: random.Random, n: int = 2000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 10))))
    return sorted(words)


def text(rng: random.Random, vocab: list[str], n: int = 50) -> str:
    return " ".join(rng.choices(vocab, k=n))


def config(base: Path, db: Path, interval: str = "1h") -> Path:
    import tomllib

    shipped = (REPO / "etc" / "sql-sqlite.toml").read_text(encoding="utf-8")
    tomllib.loads(shipped)  # the example must parse
    body = shipped.split("[[sources.sql]]", 1)[1]
    body = body.replace('url = "sqlite:////var/lib/app/app.db"', f'url = "sqlite:///{db}"')
    body = body.replace('interval = "1m"', f'interval = "{interval}"')
    cfg = base / f"sql-{interval}.toml"
    cfg.write_text(f'state_dir = "{base}/state"\ncontrol_socket = "{base}/s.sock"\nlog_level = "warning"\n\n'
                   f"[[sources.sql]]{body}", encoding="utf-8")
    return cfg


def index_pass(cfg: Path) -> tuple[dict, float]:
    t0 = time.monotonic()
    p = cli("index", "-c", str(cfg), "--json")
    return json.loads(p.stdout), time.monotonic() - t0


def waiting(db: Path) -> int:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT count(*) FROM queue WHERE status <> 'C'").fetchone()[0]
    finally:
        con.close()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--changes", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()
    rng = random.Random(29)
    vocab = vocabulary(rng)
    base = Path(tempfile.mkdtemp(prefix="ixsb"))
    db = base / "app.db"
    result: dict = {"bench": "sql", "when": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                "sqlite": sqlite3.sqlite_version}}
    daemon = None
    try:
        con = sqlite3.connect(db)
        con.executescript((REPO / "etc" / "sql-queue-sqlite.sql").read_text(encoding="utf-8"))
        t0 = time.monotonic()
        con.executemany("INSERT INTO articles (id, title, body, updated) VALUES (?, ?, ?, ?)",
                        ((i, f"Article {i} {rng.choice(vocab)}", text(rng, vocab),
                          f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z") for i in range(1, a.rows + 1)))
        con.execute("DELETE FROM queue")
        con.commit()
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        result["generate_seconds"] = round(time.monotonic() - t0, 2)
        result["db_bytes"] = db.stat().st_size

        # 1. full load
        cfg = config(base, db)
        summary, wall = index_pass(cfg)
        s = summary["sources"]["articles"]
        if s["indexed"] != a.rows:
            sys.exit(f"full load indexed {s['indexed']} of {a.rows}: {summary}")
        result["full_load"] = {"rows": a.rows, "wall_seconds": round(wall, 2),
                               "pass_seconds": summary["elapsed_seconds"],
                               "rows_per_second_wall": round(a.rows / wall, 1),
                               "rows_per_second_pass": round(a.rows / summary["elapsed_seconds"], 1),
                               "index_bytes": sum(p.stat().st_size for p in (base / "state" / "index").iterdir())}
        print(f"full load: {a.rows} rows in {wall:.1f} s", file=sys.stderr)

        # 2. queue drain
        ids = rng.sample(range(1, a.rows + 1), a.changes)
        con.executemany("UPDATE articles SET body = ?, updated = ? WHERE id = ?",
                        ((text(rng, vocab) + " drainmarker", "2025-01-01T00:00:00Z", i) for i in ids))
        con.commit()
        passes, wall_total, pass_total, indexed = 0, 0.0, 0.0, 0
        while waiting(db):
            summary, wall = index_pass(cfg)
            passes += 1
            wall_total += wall
            pass_total += summary["elapsed_seconds"]
            indexed += summary["sources"]["articles"]["indexed"]
            if passes > a.changes // 100 + 10:
                sys.exit(f"queue not drained after {passes} passes: {waiting(db)} rows left")
        result["queue_drain"] = {"changes": a.changes, "passes": passes, "indexed": indexed,
                                 "wall_seconds": round(wall_total, 2), "pass_seconds": round(pass_total, 2),
                                 "rows_per_second_wall": round(a.changes / wall_total, 1),
                                 "rows_per_second_pass": round(a.changes / pass_total, 1)}
        print(f"queue drain: {a.changes} changes in {passes} passes, {wall_total:.1f} s", file=sys.stderr)

        # 3. lag with the daemon polling every second
        cfg1 = config(base, db, interval="1s")
        log = open(base / "daemon.log", "wb")
        daemon = subprocess.Popen([sys.executable, "-m", "indexerd.cli.main", "run", "-c", str(cfg1)],
                                  stdout=log, stderr=subprocess.STDOUT, env=env(), cwd=REPO)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if daemon.poll() is not None:
                sys.exit(f"daemon exited {daemon.returncode}: {(base / 'daemon.log').read_text()[-2000:]}")
            p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "ctl", "status", "--json", "-c", str(cfg1)],
                               capture_output=True, text=True, env=env(), cwd=REPO, timeout=30)
            if p.returncode == 0 and json.loads(p.stdout)["sources"]["articles"]["last_run"]["finished"]:
                break
            if time.monotonic() > deadline:
                sys.exit("daemon not ready in time")
            time.sleep(0.2)
        from indexerd.index import open_index

        ix = open_index(base / "state", create=False)
        lags: list[float] = []
        try:
            for n in range(a.samples):
                word = "lagword" + "".join(rng.choice("abcdefghij") for _ in range(8))
                time.sleep(rng.uniform(0.0, 1.0))   # not in step with the poll interval
                t0 = time.monotonic()
                con.execute("INSERT INTO articles (id, title, body, updated) VALUES (?, ?, ?, ?)",
                            (a.rows + 1 + n, f"Lag {n}", f"{word} {text(rng, vocab, 20)}", "2025-02-01T00:00:00Z"))
                con.commit()
                while not ix.search(word, limit=1):
                    if time.monotonic() - t0 > LAG_TIMEOUT:
                        sys.exit(f"sample {n}: not searchable within {LAG_TIMEOUT} s")
                    time.sleep(0.01)
                lags.append(time.monotonic() - t0)
        finally:
            ix.close()
        result["lag"] = {"samples": len(lags), "poll_interval_seconds": 1.0,
                         "median_seconds": round(statistics.median(lags), 3),
                         "p95_seconds": round(pct(lags, 0.95), 3), "max_seconds": round(max(lags), 3),
                         "min_seconds": round(min(lags), 3)}
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
        result["daemon_exit"] = daemon.returncode
        daemon = None
        con.close()
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"sql-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    print(f"saved {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
