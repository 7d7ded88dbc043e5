"""Index size after repeated full re-index passes, before and after the reclaiming merge policy.

Run from the repo root: .venv/bin/python bench/bench_reclaim.py before|after  (1,000 documents,
batches of 50 committed with merge=False, an idle merge after each pass; about a minute).
"""
import pathlib
import sys
import tempfile
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
import test_reclaim as t
from indexerd import index as I
from indexerd.index import open_index
mode = sys.argv[1]
if mode == "before":
    def commit(self, *, merge):
        try:
            self._w.commit() if merge else self._w.commit(merge=False)
        finally:
            self._release()
    I._WhooshSession.commit = commit
t.DOCS = 1000; t.BATCH = 50
d = pathlib.Path(tempfile.mkdtemp())
f = open_index(d / "fresh"); t.full_pass(f); t.idle_merge(f)
print(mode, "fresh", f.size_bytes(), f.segment_count())
ix = open_index(d / "ix"); t.full_pass(ix); t.idle_merge(ix)
for p in range(1, 9):
    t.full_pass(ix); t.idle_merge(ix)
    print(mode, "pass", p, "bytes", ix.size_bytes(), "segments", ix.segment_count(), "stored", ix._ix.doc_count_all(), "live", ix.doc_count())
assert t.results(ix) == t.results(f)
