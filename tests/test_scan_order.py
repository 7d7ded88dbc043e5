"""The reconcile of a tree as a merge: the walk yields files in key order, the store's rows are
read in chunks in the same order, and neither is held whole in memory (issue 16).

Names are chosen around the places where key order differs from name order: ``/`` after a
directory's name, percent-encoded bytes, a mailbox's messages (``#``) right after the mailbox.
"""

from __future__ import annotations

import mailbox
import os
import tracemalloc
from pathlib import Path

import pytest

from indexerd.config import parse_config
from indexerd.runtime.indexer import Indexer
from indexerd.core.store import DocumentRecord
import indexerd.core.store.documents as documents
from indexerd.sources.files.globs import PathMatcher
from indexerd.core.filekeys import path_to_key
from indexerd.sources.files.walk import Unlisted, walk, walk_runs
from conftest import layout_toml

#: The helpers whose tests run on every state store (conftest.pytest_generate_tests): the
#: merge needs the store's key order to be the walk's on PostgreSQL too.
EVERY_STORE_CALLS = ("one_pass(tmp_path",)

#: names whose keys sort differently from the names: "a/" (a directory) after "a-b" and "a.txt"
#: but before "a0"; a space and "é" percent-encoded; an undecodable byte; upper case before lower
NAMES = ["a", "a-b", "a.txt", "a0", "A", "_x", "~y", "b c.txt", "é.txt", os.fsdecode(b"\xff.txt"),
         "%41.txt", "z"]


def make_tree(root: Path) -> set[str]:
    rels = [n + ".f" if n in ("a", "z") else n for n in NAMES]  # "a" and "z" also directories below
    rels += ["a/inner.txt", "a/b c/deep.txt", "z/last.txt", "a-dir/x.txt"]
    for i, rel in enumerate(rels):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"words of file {i}\n")
    return {path_to_key(str(root / r)) for r in rels}


def test_walk_yields_every_file_in_key_order(tmp_path) -> None:
    root = tmp_path / "root"
    expected = make_tree(root)
    got = [w.key for w in walk(str(root), PathMatcher(["*"], []), follow_symlinks=False)]
    assert got == sorted(expected)  # the store's order: code points of the ASCII keys


def test_walk_runs_are_the_walk_cut_at_each_subdirectory(tmp_path) -> None:
    """The reconcile takes the walk a run at a time: the runs, joined, are the walk; each holds
    files of one directory, and a directory's files on both sides of a subdirectory come in
    two runs (the subdirectory's files between them, in key order)."""
    root = tmp_path / "root"
    make_tree(root)
    matcher = PathMatcher(["*"], [])
    runs = list(walk_runs(str(root), matcher, follow_symlinks=False))
    flat = [w for run in runs for w in run]
    assert [w.key for w in flat] == [w.key for w in walk(str(root), matcher, follow_symlinks=False)]
    assert all(run and len({os.path.dirname(w.path) for w in run}) == 1 for run in runs)
    top = [sorted(w.path for w in run) for run in runs if os.path.dirname(run[0].path) == str(root)]
    # the top's files before "a-dir/", between it and "a/", between "a/" and "z/", after "z/"
    assert len(top) == 4
    assert str(root / "a.txt") in top[1] and str(root / "a0") in top[2] and str(root / "z.f") in top[2]
    assert top[3] == [str(root / "~y")]
    assert all(w.key == path_to_key(w.path) for w in flat)  # "b c.txt", "é.txt": encoded


def test_walk_reports_an_unlisted_directory_in_its_place(tmp_path, monkeypatch) -> None:
    root = tmp_path / "root"
    make_tree(root)
    real_scandir = os.scandir

    def scandir(path="."):  # the listing fails as EACCES would (root reads any mode)
        if os.fspath(path) == str(root / "a"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    items = list(walk(str(root), PathMatcher(["*"], []), follow_symlinks=False))
    where = next(i for i, x in enumerate(items) if isinstance(x, Unlisted))
    assert items[where].prefix == path_to_key(str(root / "a")) + "/"
    before, after = items[where - 1].key, items[where + 1].key
    assert before < items[where].prefix < after


def indexer(tmp_path: Path, root: Path) -> Indexer:
    cfg = parse_config(f'state_dir = "{tmp_path / "state"}"\n'
                       f'[[sources.filesystem]]\nname = "tree"\npath = "{root}"\n'
                       f'{layout_toml(tmp_path / "state")}', "<test>")
    return Indexer(cfg)


def one_pass(tmp_path: Path, root: Path) -> tuple[dict, set[str]]:
    ix = indexer(tmp_path, root)
    ix.open("index")
    try:
        d = ix.run_pass(progress=False).as_dict()
        return d, ix.store.keys()
    finally:
        ix.close()


def test_reconcile_across_chunk_boundaries(tmp_path, monkeypatch) -> None:
    """Three rows per chunk: every boundary falls somewhere among the awkward names; an unchanged
    pass reads nothing and deletes nothing, and a deletion removes exactly what went."""
    monkeypatch.setattr(documents, "STAT_CHUNK", 3)
    root = tmp_path / "root"
    files = make_tree(root)
    box = mailbox.mbox(str(root / "inbox"))
    for n in range(3):
        box.add(f"From: a@example.org\nMessage-ID: <m{n}@example.org>\nSubject: note {n}\n\nbody {n}\n")
    box.close()
    for sibling in ("inbox-2.txt", "inbox.bak", "inbox.d/x.txt"):  # keys right after the messages'
        (root / sibling).parent.mkdir(exist_ok=True)
        (root / sibling).write_text("sibling\n")
    d, keys = one_pass(tmp_path, root)
    messages = {k for k in keys if "#" in k}
    assert len(messages) == 3 and d["errors"] == 0
    d, again = one_pass(tmp_path, root)
    assert again == keys
    assert (d["indexed"], d["deleted"], d["unchanged"]) == (0, 0, d["seen"]), d

    (root / "b c.txt").unlink()
    (root / os.fsdecode(b"\xff.txt")).unlink()
    (root / "a" / "b c" / "deep.txt").unlink()
    (root / "inbox.bak").unlink()
    d, after = one_pass(tmp_path, root)
    went = {path_to_key(str(root / r)) for r in ("b c.txt", os.fsdecode(b"\xff.txt"), "a/b c/deep.txt", "inbox.bak")}
    assert went <= files | {path_to_key(str(root / "inbox.bak"))}
    assert after == keys - went
    assert d["deleted"] == 4 and d["indexed"] == 0, d


@pytest.mark.parametrize("chunk", [7, 2000])
def test_a_run_that_differs_goes_file_by_file(tmp_path, monkeypatch, chunk) -> None:
    """The reconcile compares a directory's run of files with the next stored rows at once; one
    edit, one deletion and one new file in the middle of the run (and chunk boundaries inside
    it) send it file by file: exactly those are read or deleted, the rest counted unchanged."""
    monkeypatch.setattr(documents, "STAT_CHUNK", chunk)
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    for i in range(50):
        (root / "sub" / f"f{i:03d}.txt").write_text(f"file {i}\n")
    (root / "top.txt").write_text("top\n")
    d, keys = one_pass(tmp_path, root)
    assert (d["indexed"], d["errors"]) == (51, 0), d
    d, _ = one_pass(tmp_path, root)
    assert (d["unchanged"], d["indexed"], d["deleted"]) == (51, 0, 0), d

    (root / "sub" / "f010.txt").write_text("file 10, edited and longer\n")
    (root / "sub" / "f025.txt").unlink()
    (root / "sub" / "f030b.txt").write_text("a new file\n")
    d, after = one_pass(tmp_path, root)
    assert (d["indexed"], d["deleted"], d["unchanged"]) == (2, 1, 49), d
    assert after == keys - {path_to_key(str(root / "sub" / "f025.txt"))} | \
        {path_to_key(str(root / "sub" / "f030b.txt"))}
    d, _ = one_pass(tmp_path, root)
    assert (d["unchanged"], d["indexed"], d["deleted"]) == (51, 0, 0), d


def fill_store(ix: Indexer, root: Path) -> int:
    """The rows an earlier pass would have left for every file of ``root`` (read nowhere)."""
    recs = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(dirpath, name))
            recs.append(DocumentRecord(key=path_to_key(os.path.join(dirpath, name)), source="tree",
                                       status="indexed", reason="new", mtime_ns=st.st_mtime_ns,
                                       size=st.st_size, ctime_ns=st.st_ctime_ns, ino=st.st_ino))
    ix.store.write_batch(recs)
    return len(recs)


def unchanged_pass_peak(tmp_path: Path, n: int) -> int:
    root = tmp_path / f"t{n}"
    for i in range(n):
        d = root / f"d{i // 100:04d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"file-{i:06d}.txt").write_bytes(b"")
    ix = indexer(tmp_path / f"s{n}", root)
    ix.open("index")
    try:
        assert fill_store(ix, root) == n
        tracemalloc.start()
        try:
            d = ix.run_pass(progress=False).as_dict()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        ix.close()
    assert (d["seen"], d["unchanged"], d["deleted"]) == (n, n, 0), d
    return peak


@pytest.mark.alone  # a memory bound: its writer's batches grow when the other worker loads the machine
def test_unchanged_reconcile_memory_does_not_grow_with_the_tree(tmp_path) -> None:
    """Ten times the files, about the same peak: the pass holds a chunk of rows and the
    directories on its path, not a map of the tree (which cost about 1.5 KB per file)."""
    small = unchanged_pass_peak(tmp_path, 500)
    large = unchanged_pass_peak(tmp_path, 5000)
    # a map of the tree grew ~6.7 MB here; under load the writer's batches grow (1.96 MB seen
    # twice in a full run, 0.3-0.5 MB alone), so the bound leaves room for that and no more
    assert large - small < 3_000_000, (small, large)
