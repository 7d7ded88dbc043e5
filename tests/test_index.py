"""The Whoosh index under a reader that lists the directory while a commit swaps the TOC.

A reader finds the newest TOC by listing the directory; during a commit the writer renames the new
TOC in and deletes the old one, and a listing may catch neither (POSIX leaves readdir unspecified
for entries added or removed meanwhile).  CI saw it: ``ctl status`` answered
``EmptyIndexError: Index 'MAIN' does not exist`` while the start-up reconcile committed.  These
tests make that moment real -- the TOC file is renamed away on disk for a while -- and check that
readers wait it out and that opening never mistakes it for "no index" (``create_in`` would wipe
every segment).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from indexerd.core.errors import IndexUnavailable
from indexerd.index import IndexDoc, open_index

UTC = timezone.utc
pytestmark = pytest.mark.usefixtures("indexes_closed")  # no analysis worker left behind


def doc(n: int) -> IndexDoc:
    return IndexDoc(key=f"file:///d/{n}.txt", source="docs", url=f"file:///d/{n}.txt", path=f"/d/{n}.txt",
                    title=f"doc {n}", content=f"word{n} common", last_modified=datetime(2026, 1, 1, tzinfo=UTC),
                    date_source="mtime", media_type="text/plain", size=10)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    ix = open_index(tmp_path)
    s = ix.session()
    for n in range(3):
        s.update(doc(n))
    s.commit(merge=False)
    return tmp_path


def toc(state: Path) -> Path:
    (only,) = (state / "index").glob("_MAIN_*.toc")
    return only


def hide_toc_for(state: Path, seconds: float) -> threading.Thread:
    """Rename the TOC out of Whoosh's sight now and back after ``seconds`` (in a thread)."""
    real = toc(state)
    hidden = real.with_name("hidden.toc.away")
    os.rename(real, hidden)

    def back() -> None:
        time.sleep(seconds)
        os.rename(hidden, real)

    t = threading.Thread(target=back)
    t.start()
    return t


def test_doc_count_waits_out_a_listing_without_toc(state: Path) -> None:
    ix = open_index(state)
    t = hide_toc_for(state, 0.15)
    try:
        assert ix.doc_count() == 3
        assert ix.segment_count() == 1
    finally:
        t.join()
    assert {k for k, _ in ix.keys()} == {f"file:///d/{n}.txt" for n in range(3)}


def test_keys_wait_out_a_listing_without_toc(state: Path) -> None:
    ix = open_index(state)
    t = hide_toc_for(state, 0.15)
    try:
        assert {k for k, _ in ix.keys()} == {f"file:///d/{n}.txt" for n in range(3)}
    finally:
        t.join()


def test_open_with_create_never_wipes_an_index_whose_toc_it_missed(state: Path) -> None:
    t = hide_toc_for(state, 0.15)
    try:
        ix = open_index(state, create=True)
    finally:
        t.join()
    assert ix.doc_count() == 3
    assert [h.key for h in ix.search("word1")] == ["file:///d/1.txt"]
    assert not (state / "index" / "_MAIN_0.toc").exists()  # no empty index was created over it


def test_segments_without_any_toc_are_refused_not_recreated(state: Path) -> None:
    os.remove(toc(state))
    segments = sorted(p.name for p in (state / "index").iterdir())
    with pytest.raises(IndexUnavailable, match=r"no readable table of contents.*--rebuild"):
        open_index(state, create=True)
    assert sorted(p.name for p in (state / "index").iterdir()) == segments  # nothing deleted


def test_a_toc_gone_for_good_is_a_clear_error(state: Path) -> None:
    ix = open_index(state)
    os.remove(toc(state))
    with pytest.raises(IndexUnavailable, match=r"keeps changing.*--rebuild"):
        ix.doc_count()


# -- the compact hash writer: same bytes, a tenth of the memory ----------------------------------


def _write_hash_file(path: Path, keys: list[bytes], patched: bool) -> bytes:
    """Write an OrderedHashWriter file with Whoosh's own code or with the patched one."""
    import importlib

    from whoosh.filedb import filetables as ft
    from whoosh.filedb.filestore import FileStorage

    from indexerd.index.whoosh import patches

    assert patches.install()
    saved = (ft.HashWriter.__init__, ft.HashWriter.add, ft.HashWriter._write_hashes)
    if not patched:  # Whoosh's original methods, from a fresh copy of the module
        fresh = importlib.reload(importlib.import_module("whoosh.filedb.filetables"))
        ft.HashWriter.__init__, ft.HashWriter.add, ft.HashWriter._write_hashes = \
            fresh.HashWriter.__init__, fresh.HashWriter.add, fresh.HashWriter._write_hashes
    try:
        storage = FileStorage(str(path.parent))
        w = ft.OrderedHashWriter(storage.create_file(path.name))
        for k in keys:
            w.add(k, b"v:" + k)
        w.close()
    finally:
        ft.HashWriter.__init__, ft.HashWriter.add, ft.HashWriter._write_hashes = saved
    return path.read_bytes()


def test_compact_hash_writer_writes_the_same_bytes(tmp_path: Path) -> None:
    from whoosh.filedb import filetables as ft
    from whoosh.filedb.filestore import FileStorage

    keys = sorted({f"term{n * 7919 % 100003}".encode() for n in range(20_000)} | {b"\xff" * 3})
    ours = _write_hash_file(tmp_path / "ours.hsh", keys, patched=True)
    theirs = _write_hash_file(tmp_path / "theirs.hsh", keys, patched=False)
    assert ours == theirs
    r = ft.OrderedHashReader(FileStorage(str(tmp_path)).open_file("ours.hsh"), len(ours))
    assert all(r[k] == b"v:" + k for k in keys[::97]) and b"term100004" not in r
    assert list(r.keys()) == keys


def test_compact_hash_writer_memory_per_term(tmp_path: Path) -> None:
    """200,000 terms pending in the writer take under 4 MB (Whoosh's tuples: ~26 MB)."""
    import tracemalloc

    from whoosh.filedb import filetables as ft
    from whoosh.filedb.filestore import FileStorage

    from indexerd.index.whoosh import patches

    assert patches.install()
    w = ft.HashWriter(FileStorage(str(tmp_path)).create_file("m.hsh"))
    tracemalloc.start()
    try:
        for n in range(200_000):
            w.add(b"k%d" % n, b"")
        current, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current < 4 * 1024 * 1024, current
