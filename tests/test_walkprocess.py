"""The walk of a large tree in a process of its own (indexerd.sources.files.walkprocess): the
same files, keys and stats as the walk in process, on real files; the reconcile through it finds
every change; the process ends with its generator and a process that ends early fails the pass
before anything is deleted."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from indexerd.core.errors import EnvironmentFailure
from indexerd.sources.files import scan as scan_mod
from indexerd.sources.files import walkprocess
from indexerd.sources.files.globs import PathMatcher
from indexerd.sources.files.table import DEFAULT_EXCLUDES
from indexerd.sources.files.walk import Unlisted, walk_runs
from indexerd.sources.files.walkprocess import WalkedElsewhere, walk_runs_elsewhere
from test_files import make_indexer, write


def tricky_tree(root: Path) -> None:
    """Nested directories, names that need percent-encoding (in a file's name and in a
    directory's), a name that is not UTF-8, excluded names, a symlink, an empty directory."""
    for rel in ("a.txt", "b/c.txt", "b/d/e.md", "b/d/f.txt", "sp ace/g.txt", "pct%/h#1.txt",
                "z/y/x/w.txt", "b/notes.swp", ".git/config", "b/k~", "b/zz.txt"):
        write(root / rel, f"content of {rel}\n")
    (root / "empty").mkdir()
    os.symlink(root / "a.txt", root / "b" / "link.txt")
    with open(os.fsencode(root / "b") + b"/caf\xe9.txt", "wb") as f:
        f.write(b"latin-1 name\n")


def flattened(runs) -> list:
    out = []
    for run in runs:
        if isinstance(run, Unlisted):
            out.append(("unlisted", run.path, run.prefix))
        elif isinstance(run, WalkedElsewhere):
            out.extend(zip(run.keys, run.stats))
        else:
            out.extend((w.key, (w.stat.st_mtime_ns, w.stat.st_size, w.stat.st_ctime_ns, w.stat.st_ino))
                       for w in run)
    return out


@pytest.mark.parametrize("include", [["*"], ["*.md", "z/*/x/*.txt", "sp ace/*"]])
def test_the_walk_elsewhere_yields_the_walk_in_process(tmp_path, include) -> None:
    root = tmp_path / "root"
    tricky_tree(root)
    exclude = list(DEFAULT_EXCLUDES)
    here = flattened(walk_runs(str(root), PathMatcher(include, exclude), follow_symlinks=False))
    seen: list[int] = []
    there = flattened(walk_runs_elsewhere(str(root), include, exclude, on_file=seen.append))
    assert there == here
    assert len(here) == (9 if include == ["*"] else 3) and sum(seen) == len(here)
    sub = str(root / "b")
    assert flattened(walk_runs_elsewhere(str(root), include, exclude, start=sub)) == \
        flattened(walk_runs(str(root), PathMatcher(include, exclude), follow_symlinks=False, start=sub))
    # a run is stat'ed again as the walk in process would have: the same files
    runs = [r for r in walk_runs_elsewhere(str(root), include, exclude) if isinstance(r, WalkedElsewhere)]
    again = [w for r in runs for w in r.files()]
    assert [(w.key, w.path, w.stat, w.in_order) for w in again] == \
        [(w.key, w.path, w.stat, w.in_order) for r in walk_runs(str(root), PathMatcher(include, exclude),
                                                                   follow_symlinks=False) for w in r]


def _walkers() -> set[int]:
    """The walking processes that are children of this one."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"indexerd.sources.files.walkprocess" in cmd:
            out.add(int(pid))
    return out


def test_closing_the_walk_ends_its_process_and_a_process_that_ends_early_is_an_error(tmp_path, monkeypatch) -> None:
    root = tmp_path / "root"
    for i in range(3000):  # more than one frame
        write(root / f"d{i // 100}" / f"f{i}.txt", "x\n")
    runs = walk_runs_elsewhere(str(root), ["*"], [])
    next(runs)
    assert len(_walkers()) == 1
    runs.close()
    assert _walkers() == set()
    monkeypatch.setattr(sys, "executable", "/bin/true")  # starts, writes nothing, exits 0
    with pytest.raises(EnvironmentFailure, match="ended before the walk did"):
        list(walk_runs_elsewhere(str(root), ["*"], []))


@contextmanager
def opened_tree(tmp_path: Path, files: int, dirs: int, text: str):
    """An indexer opened on a tree of ``files`` files spread over ``dirs`` directories
    (``d{i % dirs}/f{i:02d}.txt``, each ``text`` formatted with ``i``), closed after."""
    root = tmp_path / "root"
    for i in range(files):
        write(root / f"d{i % dirs}" / f"f{i:02d}.txt", text.format(i=i))
    ix = make_indexer(tmp_path, root)
    ix.open("index")
    try:
        yield root, ix
    finally:
        ix.close()


def test_a_reconcile_through_the_walk_elsewhere_finds_every_change(tmp_path, monkeypatch) -> None:
    """The same tree passes with the walk in process and elsewhere: an unchanged pass reads
    nothing; a same-size rewrite, a new file, a deleted one, a rename within a directory and a
    file replaced by a directory are each found."""
    used: list[bool] = []
    real = scan_mod.walks_elsewhere

    def walks_elsewhere(*args):
        used.append(real(*args))
        return used[-1]

    monkeypatch.setattr(scan_mod, "walks_elsewhere", walks_elsewhere)
    monkeypatch.setattr(walkprocess, "WALK_PROCESS_MIN_FILES", 10)
    with opened_tree(tmp_path, 40, 4, "original text {i:02d}\n") as (root, ix):
        first = ix.run_pass(progress=False).as_dict()
        assert (first["indexed"], used) == (40, [False])  # an empty store: the walk in process
        again = ix.run_pass(progress=False).as_dict()
        assert (again["unchanged"], again["indexed"], used[-1]) == (40, 0, True)
        write(root / "d0" / "f00.txt", "changed text 00\n")  # same size, new content
        write(root / "d1" / "new.txt", "brand new file\n")
        (root / "d2" / "f02.txt").unlink()
        (root / "d3" / "f03.txt").rename(root / "d3" / "g03.txt")
        (root / "d1" / "f01.txt").unlink()
        write(root / "d1" / "f01.txt" / "inner.txt", "a directory now\n")
        d = ix.run_pass(progress=False).as_dict()
        assert used[-1] is True
        assert (d["indexed"], d["deleted"], d["unchanged"]) == (4, 3, 36), d
        keys = ix.store.keys()
        assert (root / "d3" / "g03.txt").as_uri() in keys and (root / "d3" / "f03.txt").as_uri() not in keys
        assert (root / "d2" / "f02.txt").as_uri() not in keys
        assert (root / "d1" / "f01.txt" / "inner.txt").as_uri() in keys and len(keys) == 40
        ix.flush()
        assert [h.path for h in ix.index().search("changed", limit=5)] == [str(root / "d0" / "f00.txt")]
        forced = ix.run_pass(progress=False, forced=True).as_dict()
        assert (forced["indexed"] + forced["unchanged"] + forced["skipped"], forced["deleted"]) == (40, 0), forced


def test_a_walking_process_that_dies_fails_the_pass_and_deletes_nothing(tmp_path, monkeypatch) -> None:
    """The walking process ends before the walk (killed, out of memory): the pass reports the
    failure, every document stays (what the walk did not report is not gone), and the next pass
    runs normally."""
    monkeypatch.setattr(walkprocess, "WALK_PROCESS_MIN_FILES", 1)
    with opened_tree(tmp_path, 20, 2, "text {i}\n") as (_root, ix):
        assert ix.run_pass(progress=False).as_dict()["indexed"] == 20
        real = sys.executable
        monkeypatch.setattr(sys, "executable", "/bin/true")
        failed = ix.run_pass(progress=False)
        d = failed.as_dict()
        assert d["deleted"] == 0 and d["errors"] >= 1, d
        assert failed.totals.failed == failed.totals.last_error == \
            "the walk's process ended before the walk did (exit 0): nothing is deleted this pass"
        assert len(ix.store.keys()) == 20
        monkeypatch.setattr(sys, "executable", real)
        again = ix.run_pass(progress=False).as_dict()
        assert (again["unchanged"], again["deleted"]) == (20, 0), again
