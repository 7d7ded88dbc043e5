"""A tree of any depth keeps its watch (indexerd/sources/files/watchwalk.py), and a watch whose
thread dies anyway is reported and set up again (TreeWatcher.check): real directories, the real
watchdog observer."""

from __future__ import annotations

import os
import queue
import subprocess
import time
from pathlib import Path

import pytest

from indexerd.sources.files.watchwalk import walk_iteratively


def _deep(top: Path, levels: int) -> Path:
    bottom = top
    for _ in range(levels):
        bottom = bottom / "d"
        bottom.mkdir(parents=bottom.parent == top)
    return bottom


def test_the_iterative_walk_yields_what_os_walk_does_pruning_and_symlinks_included(tmp_path) -> None:
    for rel in ("a/b/c", "a/x", "b", "skip/inner", "z/y"):
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
    for rel in ("f.txt", "a/g.txt", "a/b/c/h.txt", "skip/inner/i.txt"):
        (tmp_path / rel).write_text("x", encoding="utf-8")
    os.symlink(tmp_path / "a", tmp_path / "link")  # not followed unless asked

    def walked(walk, top, **kw):
        out = []
        for root, dirs, files in walk(top, **kw):
            dirs[:] = [d for d in sorted(dirs) if d != "skip"]  # pruning, in place
            out.append((root, dirs[:], sorted(files)))
        return out

    for kw in ({}, {"followlinks": True}):
        assert walked(walk_iteratively, str(tmp_path), **kw) == walked(os.walk, str(tmp_path), **kw)
    assert walked(walk_iteratively, os.fsencode(tmp_path)) == walked(os.walk, os.fsencode(tmp_path))


def test_the_iterative_walk_reaches_the_bottom_of_a_tree_os_walk_cannot(tmp_path) -> None:
    bottom = _deep(tmp_path / "deep", 1100)
    (bottom / "end.txt").write_text("x", encoding="utf-8")
    with pytest.raises(RecursionError):
        list(os.walk(tmp_path))  # what watchdog's own walk did, on Python 3.11
    files = [os.path.join(root, f) for root, _, fs in walk_iteratively(str(tmp_path)) for f in fs]
    assert files == [str(bottom / "end.txt")]
    subprocess.run(["rm", "-rf", str(tmp_path / "deep")], check=True, timeout=60)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the death is the test
def test_a_watch_whose_thread_dies_is_reported_and_set_up_again(tmp_path) -> None:
    """The emitter of a watch raises (as watchdog's recursive walk did on a deep tree): check()
    names the source and why, the tree's watch is dropped, and watch() sets it up again, after
    which its events arrive."""
    from indexerd.sources.files.watch import ChangeQueue, TreeWatcher

    changes = ChangeQueue(max_delay_seconds=0.05)
    w = TreeWatcher(changes, lambda s, p, d: True, on_overflow=lambda: None, on_watch_limit=lambda s: None)
    w.start()
    try:
        assert w.watch("docs", str(tmp_path))
        emitter = next(iter(w._observer.emitters))
        died = queue.Queue()

        def queue_events(timeout):
            died.put(True)
            raise RecursionError("maximum recursion depth exceeded")

        emitter.queue_events = queue_events  # the thread's next round raises ...
        (tmp_path / "wake.txt").write_text("x", encoding="utf-8")  # ... once its read of events returns
        died.get(timeout=10)
        emitter.join(5)
        assert not emitter.is_alive()
        dead = w.check()
        assert dead == {"docs": "directory tree too deep to watch (RecursionError: maximum recursion depth exceeded)"}
        assert w.watched_sources() == set() and w.check() == {}
        assert w.watch("docs", str(tmp_path)) and w.errors == {}
        (tmp_path / "new.txt").write_text("x", encoding="utf-8")
        deadline = time.monotonic() + 10
        seen: list[str] = []
        while str(tmp_path / "new.txt") not in seen and time.monotonic() < deadline:
            seen += [c.path for c in changes.take_due(timeout=0.1)]
        assert str(tmp_path / "new.txt") in seen
    finally:
        w.stop()
