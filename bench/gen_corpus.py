#!/usr/bin/env python3
"""Deterministic synthetic text tree for the scale benchmark.

  gen_corpus.py DIR N [--seed 1]

Writes N plain-text files under DIR in nested directories (DIR/tNN/mNN/lNN/fNNNNNNN.txt,
50 files per leaf directory, 20 leaves per middle directory, 25 middles per top directory).
Words come from a fixed vocabulary of 30,000 pronounceable pseudo-words drawn with a Zipf-like
frequency (rank^-1.07), in lines of 6-16 words; sizes are log-uniform between 1 KiB and 20 KiB
(mean about 6.3 KiB). Each file starts with a title line holding its number and a few rarer words.
File i depends only on (seed, i), so the 10k tree is a prefix of the 50k tree, and a re-run gives
byte-identical files; every file and directory gets mtime 2024-01-01 00:00:00 UTC.
DIR.done records the parameters; an existing complete tree with the same parameters is kept.
"""
from __future__ import annotations

import argparse, itertools, json, math, os, random, shutil, sys, time

MTIME = 1704067200  # 2024-01-01 00:00:00 UTC
CONS = "bcdfghjklmnprstvwz"
VOW = "aeiou"


def vocabulary(seed: int, n: int = 30000) -> list[str]:
    rng = random.Random(seed)
    words, seen = [], set()
    while len(words) < n:
        w = "".join(rng.choice(CONS) + rng.choice(VOW) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        if rng.random() < 0.3:
            w += rng.choice(CONS)
        if w not in seen:
            seen.add(w); words.append(w)
    return words


def text_pool(seed: int, vocab: list[str], nwords: int = 1_500_000) -> str:
    rng = random.Random(seed + 1)
    cum = list(itertools.accumulate(1.0 / (r + 1) ** 1.07 for r in range(len(vocab))))
    ws = rng.choices(vocab, cum_weights=cum, k=nwords)
    out, i = [], 0
    while i < nwords:
        k = rng.randint(6, 16)
        out.append(" ".join(ws[i:i + k]))
        i += k
    return "\n".join(out) + "\n"


def rel_path(i: int) -> str:
    return f"t{i // 25000:02d}/m{(i // 1000) % 25:02d}/l{(i // 50) % 20:02d}/f{i:07d}.txt"


def generate(root: str, n: int, seed: int) -> dict:
    params = {"n": n, "seed": seed, "version": 1}
    done = root.rstrip("/") + ".done"
    if os.path.exists(done) and os.path.isdir(root):
        try:
            if json.load(open(done))["params"] == params:
                return json.load(open(done))
        except (ValueError, KeyError):
            pass
    t0 = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    if os.path.exists(done):
        os.remove(done)
    vocab = vocabulary(seed)
    pool = text_pool(seed, vocab)
    total = 0
    dirs = set()
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        size = int(math.exp(rng.uniform(math.log(1024), math.log(20480))))
        off = pool.index("\n", rng.randrange(len(pool) - 25000)) + 1
        end = pool.find("\n", off + size)
        title = f"document {i} " + " ".join(rng.choice(vocab) for _ in range(5))
        body = title + "\n\n" + pool[off:end + 1]
        p = os.path.join(root, rel_path(i))
        d = os.path.dirname(p)
        if d not in dirs:
            os.makedirs(d, exist_ok=True); dirs.add(d)
        with open(p, "w") as f:
            f.write(body)
        os.utime(p, (MTIME, MTIME))
        total += len(body)
    for d in sorted(dirs | {os.path.dirname(x) for x in dirs} | {os.path.dirname(os.path.dirname(x)) for x in dirs} | {root},
                    key=len, reverse=True):
        os.utime(d, (MTIME, MTIME))
    info = {"params": params, "files": n, "bytes": total, "gen_seconds": round(time.perf_counter() - t0, 1)}
    json.dump(info, open(done, "w"))
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    info = generate(a.dir, a.n, a.seed)
    print(json.dumps(info))


if __name__ == "__main__":
    sys.exit(main())
