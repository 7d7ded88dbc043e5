"""JSON extraction (indexerd/extract/jsontext.py) beside its floor, the same bytes read as plain text.

For each document -- an API dump of user records (tests/test_jsontext.py ``records_json``) of
100 KB and 1 MB (parsed in the calling process) and 10 MB (in an extraction worker), and 10 MB
of empty objects (the parser's worst case for memory, a dict per 3 bytes) --, per repetition, in
alternating order: ``extract(data, name="x.json")`` and ``extract(data, name="x.txt")`` (plain
text: decode and tidy lines, the cost a .json file had before).  Reported: the median wall time
of each, their ratio, and the peak RSS a worker-side parse adds (the worker's ``ru_maxrss``
after the document minus before, read from ``/proc/PID/status`` ``VmHWM``).

    .venv/bin/python bench/bench_json.py [--reps 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_jsontext import records_json  # noqa: E402

from indexerd.core.errors import SkipDocument  # noqa: E402
from indexerd.extract import extract  # noqa: E402
from indexerd.extract.isolation import default_pool  # noqa: E402


def hwm_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def timed(data: bytes, name: str) -> float:
    t = time.perf_counter()
    try:
        extract(data, name=name)
    except SkipDocument:
        pass  # empty objects give no words: skipped "empty", after the whole parse
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    docs = {"records 100 KB": records_json(100_000), "records 1 MB": records_json(1_000_000),
            "records 10 MB": records_json(10_000_000),
            "empty objects 10 MB": b"[" + b"{}," * 3_333_333 + b"{}]"}
    extract(b'{"warm": "up"}', name="w.json")
    extract(records_json(2_000_000), name="w.json")  # a worker started
    print(f"load before: {os.getloadavg()[0]:.2f}")
    print("| document | JSON extraction | as plain text (floor) | ratio | worker RSS high-water mark |")
    print("| --- | --- | --- | --- | --- |")
    for label, data in docs.items():
        js, txt = [], []
        for rep in range(args.reps):
            order = [("json", js), ("txt", txt)] if rep % 2 == 0 else [("txt", txt), ("json", js)]
            for kind, out in order:
                out.append(timed(data, f"x.{kind}"))
        pids = default_pool().pids()
        peak = max((hwm_mb(p) for p in pids), default=0.0) if len(data) > 1024 * 1024 else 0.0
        a, b = statistics.median(js), statistics.median(txt)
        print(f"| {label} ({len(data):,} B) | {a * 1000:.0f} ms | {b * 1000:.0f} ms | {a / b:.1f}x | "
              f"{f'{peak:.0f} MB' if peak else 'in process'} |")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
