#!/usr/bin/env python3
"""Analyzer throughput: today's Whoosh posting analysis vs the engine-neutral analyzer.

  bench_analysis.py [--tree DIR] [--docs DIR] [--repeat 3]

--tree: a plain-text tree (bench/gen_corpus.py DIR N); --docs: an HTML tree (the shared corpus's
python-docs), whose text is extracted first (not timed).  For each, times over all texts (best of
--repeat): ``old`` = indexerd.index.whoosh.analysis.FusedPositions.word_values with
FusedStemmingAnalyzer (the postings Whoosh indexed before), ``new`` = Analyzer.analyse plus the
same per-term position lists, ``new-nofold`` without diacritic folding.  Prints tokens/s (old
tokens) and the ratio new/old.  The word caches are warm after the first repeat, as in a long
first index.
"""
from __future__ import annotations

import argparse
import sys
import time
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def load_texts(tree: str | None, docs: str | None) -> dict[str, list[str]]:
    sets = {}
    if tree:
        sets["plain-text tree"] = [p.read_text("utf-8", "replace") for p in sorted(Path(tree).rglob("*.txt"))]
    if docs:
        from indexerd.extract import extract
        texts = []
        for p in sorted(Path(docs).rglob("*.html")):
            texts.append(extract(p.read_bytes(), "text/html").text)
        sets["python-docs (HTML text)"] = texts
    return sets


def old_postings(texts):
    from indexerd.index.whoosh.analysis import FusedPositions, FusedStemmingAnalyzer
    fmt, ana, n = FusedPositions(), FusedStemmingAnalyzer(), 0
    for t in texts:
        for _w, freq, _wt, _v in fmt.word_values(t, ana, mode="index"):
            n += freq
    return n


def new_postings(ana):
    def run(texts):
        n = 0
        for t in texts:
            tokens, _ids = ana.analyse(t)
            poses: dict[str, array] = {}
            for pos, tok in enumerate(tokens):
                plist = poses.get(tok)
                if plist is None:
                    poses[tok] = array("I", (pos,))
                else:
                    plist.append(pos)
            n += len(tokens)
        return n
    return run


def best(fn, texts, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn(texts)
        times.append(time.perf_counter() - t0)
    return min(times), n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree")
    ap.add_argument("--docs")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from indexerd.index.analysis import Analyzer
    for name, texts in load_texts(args.tree, args.docs).items():
        chars = sum(map(len, texts))
        t_old, n_old = best(old_postings, texts, args.repeat)
        print(f"{name}: {len(texts)} texts, {chars / 1e6:.1f} M chars")
        print(f"  old         {t_old:7.3f} s  {n_old / t_old / 1e6:6.2f} M tokens/s  ({n_old} tokens)")
        for label, ana in (("new", Analyzer()), ("new-nofold", Analyzer(fold_diacritics=False))):
            t_new, n_new = best(new_postings(ana), texts, args.repeat)
            print(f"  {label:11s} {t_new:7.3f} s  {n_old / t_new / 1e6:6.2f} M old-tokens/s  ({n_new} tokens)"
                  f"  time new/old {t_new / t_old:.2f}")


if __name__ == "__main__":
    main()
