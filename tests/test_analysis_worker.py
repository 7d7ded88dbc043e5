"""The analysis worker (indexerd/index/offload.py) under the engines that use it, Whoosh and
tantivy: a big session's batches are computed in a second process and applied in the order the
operations were made; a dead worker is replaced by work in-process; big documents make smaller
batches (the text a session holds stays bounded)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from indexerd.index import IndexDoc
from indexerd.index.offload import BATCH_CHARS, BATCH_DOCS

UTC = timezone.utc
ENGINES = ["whoosh", "tantivy"]


def doc(key: str, content: str, title: str = "") -> IndexDoc:
    return IndexDoc(key=key, source="docs", url=key, path=None, title=title, content=content,
                    last_modified=datetime(2024, 1, 5, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(content))


def keys(hits) -> list[str]:
    return sorted(h.key for h in hits)


@pytest.fixture(params=ENGINES)
def ix(request, tmp_path: Path):
    from indexerd.index.base import load_engine

    index = load_engine(request.param).open(tmp_path / "index", None, create=True)
    assert index._worker is not None  # 2+ cores (CI and these machines)
    yield index
    index.close()


def test_a_big_session_is_computed_by_the_worker_in_order(ix) -> None:
    s = ix.session()
    for n in range(3 * BATCH_DOCS + 4):
        s.update(doc(f"k{n}", f"first word{n} pg_hba.conf", title=f"Title{n}"))
        if n % 10 == 0:
            s.delete(f"k{n}")  # deleted right after its update: gone
        if n % 10 == 5:
            s.update(doc(f"k{n}", f"second word{n} replaced"))  # updated twice: the last wins
    proc = ix._worker._proc
    assert proc is not None and proc.poll() is None  # a worker process computed the full batches
    s.commit(merge=True)
    total = 3 * BATCH_DOCS + 4
    deleted = len(range(0, total, 10))
    replaced = len(range(5, total, 10))
    assert ix.count() == total - deleted
    assert ix.count("first") == total - deleted - replaced and ix.count("replaced") == replaced
    assert ix.search("word10") == [] and keys(ix.search("word15")) == ["k15"]
    assert keys(ix.search('"second word15"')) == ["k15"]
    assert keys(ix.search("title17")) == ["k17"] and ix.count("pg_hba") == total - deleted - replaced
    hit = ix.search("word17")[0]
    assert hit.title == "Title17" and "word17" in (hit.snippet or "")
    s = ix.session()  # a later session's delete of a committed document, behind its updates
    for n in range(BATCH_DOCS + 1):
        s.update(doc(f"new{n}", f"later{n}"))
    s.delete("k17")
    s.commit(merge=False)
    assert ix.search("word17") == [] and ix.count("later7") == 1
    ix.close()
    assert proc.wait(5) == 0  # closing the index ends the worker


def test_a_dead_worker_is_replaced_by_work_in_process(ix, caplog) -> None:
    s = ix.session()
    for n in range(BATCH_DOCS + 8):
        s.update(doc(f"a{n}", f"alpha{n}"))
    ix._worker._proc.kill()
    for n in range(2 * BATCH_DOCS + 16):
        s.update(doc(f"b{n}", f"beta{n} pg_hba.conf"))
    s.commit(merge=False)
    assert ix.count() == 3 * BATCH_DOCS + 24
    assert keys(ix.search(f"alpha{BATCH_DOCS + 7}")) == [f"a{BATCH_DOCS + 7}"]
    assert keys(ix.search("beta79")) == ["b79"] and ix.count("pg_hba.conf") == 2 * BATCH_DOCS + 16
    assert any("analysing in this process" in r.getMessage() for r in caplog.records)


def test_big_documents_make_smaller_batches(ix) -> None:
    """A batch is sent once its text reaches BATCH_CHARS, whatever the number of documents:
    the session never holds BATCH_DOCS documents of several MB each."""
    big = "word " * (BATCH_CHARS // 5 // 2 + 1)  # two of them fill a batch
    s = ix.session()
    s.update(doc("big0", big + "one"))
    assert not s._batches._queue and len(s._batches._open) == 1
    s.update(doc("big1", big + "two"))
    assert len(s._batches._queue) == 1 and s._batches._open == []  # sent after 2 documents, not BATCH_DOCS
    s.update(doc("big2", big + "three"))
    s.commit(merge=False)
    assert ix.count() == 3 and keys(ix.search("two")) == ["big1"]



@pytest.mark.parametrize("engine", ENGINES)
def test_an_index_dropped_without_close_ends_its_worker_process(engine, tmp_path: Path) -> None:
    """A caller that forgets :meth:`close` does not leave the worker process behind (a test
    worker of the suite had gathered 18 of them, 376 MB): it ends once the index is gone."""
    import gc
    import subprocess

    from indexerd.index.base import load_engine

    index = load_engine(engine).open(tmp_path / "index", None, create=True)
    s = index.session()
    for n in range(BATCH_DOCS + 1):
        s.update(doc(f"k{n}", f"word{n}"))
    s.commit(merge=False)
    proc = index._worker._proc
    assert proc is not None and proc.poll() is None
    del index, s
    gc.collect()
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the worker process outlived its index")
