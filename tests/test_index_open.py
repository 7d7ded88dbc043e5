"""When a start opens the index.  ``indexerd index`` over a tree where nothing changed does not
open an index whose files are as the last process that used it left them (their fingerprint in
the store); a change to those files, a lost fingerprint (a crash), a changed document and the
daemon all open it.  A corrupt index is still reported at the start: tests/test_bad_input.py."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from indexerd.config import parse_config
from indexerd.index import index_dir, open_index
from indexerd.runtime.indexer import Indexer
from indexerd.runtime.recovery import INDEX_FILES_META
from indexerd.sources.files.keys import RACY_WINDOW_FINE_NS

ENGINES = ["whoosh", "tantivy"]


def _config(tmp_path: Path, tree: Path, engine: str):
    return parse_config(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{tmp_path / "ctl.sock"}"\n'
                        f'[index]\nengine = "{engine}"\n'
                        f'[[sources.filesystem]]\nname = "t"\npath = "{tree}"\n', "<test>")


def _write(path: Path, text: str) -> None:
    """Write ``path``, then let the clock pass the racy window of its ctime: a scan within it
    would read the file again at the next pass (keys.RACY_WINDOW_FINE_NS), and that pass would
    open the index to store the new stat."""
    path.write_text(text)
    settled = os.stat(path).st_ctime_ns + RACY_WINDOW_FINE_NS
    while time.time_ns() <= settled:
        time.sleep(0.005)


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i, word in enumerate(("alpha", "bravo", "charlie")):
        _write(tree / f"{i}.txt", f"{word} document number {i}\n")
    return tree


class _Opened:
    """One ``indexerd index`` as the command runs it: open, (a pass), close."""

    def __init__(self, cfg, *, live: bool = False) -> None:
        self.ix = Indexer(cfg, live=live)

    def __enter__(self) -> Indexer:
        self.ix.open("index")
        return self.ix

    def __exit__(self, *exc) -> None:
        self.ix.close()


def _hits(tmp_path: Path, word: str) -> list[str]:
    ix = open_index(tmp_path / "state", create=False)
    try:
        return sorted(Path(h.path).name for h in ix.search(word, limit=10))
    finally:
        ix.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_an_unchanged_pass_leaves_the_index_unopened_and_a_change_opens_it(tmp_path, engine) -> None:
    tree = _tree(tmp_path)
    cfg = _config(tmp_path, tree, engine)
    with _Opened(cfg) as ix:
        assert ix.run_pass(progress=False).totals.indexed == 3
    with _Opened(cfg) as ix:
        assert ix.opened_index is None  # its files are as the first pass left them
        assert ix.run_pass(progress=False).totals.unchanged == 3
        assert ix.opened_index is None
    _write(tree / "new.txt", "delta arrived later\n")
    with _Opened(cfg) as ix:
        assert ix.opened_index is None
        assert ix.run_pass(progress=False).totals.indexed == 1
        assert ix.opened_index is not None  # opened for the first changed document
    assert _hits(tmp_path, "delta") == ["new.txt"]
    assert _hits(tmp_path, "alpha") == ["0.txt"]
    with _Opened(cfg) as ix:  # the write changed the files; the close recorded them again
        assert ix.opened_index is None
        assert ix.run_pass(progress=False).totals.unchanged == 4


@pytest.mark.parametrize("engine", ENGINES)
def test_an_index_whose_files_changed_since_is_opened_at_the_start(tmp_path, engine) -> None:
    tree = _tree(tmp_path)
    cfg = _config(tmp_path, tree, engine)
    with _Opened(cfg) as ix:
        ix.run_pass(progress=False)
    one = sorted(p for p in index_dir(tmp_path / "state").iterdir() if p.is_file())[0]
    later = time.time() + 5
    os.utime(one, (later, later))  # same bytes, another mtime: not as it was left
    with _Opened(cfg) as ix:
        assert ix.opened_index is not None
    with _Opened(cfg) as ix:  # recorded at that close
        assert ix.opened_index is None


@pytest.mark.parametrize("engine", ENGINES)
def test_an_index_without_a_recorded_fingerprint_is_opened_at_the_start(tmp_path, engine) -> None:
    tree = _tree(tmp_path)
    cfg = _config(tmp_path, tree, engine)
    with _Opened(cfg) as ix:
        ix.run_pass(progress=False)
    with sqlite3.connect(tmp_path / "state" / "state.sqlite3") as db:  # as after a crash
        assert db.execute("DELETE FROM meta WHERE key = ?", (INDEX_FILES_META,)).rowcount == 1
    with _Opened(cfg) as ix:
        assert ix.opened_index is not None


def test_the_daemon_opens_the_index_at_its_start(tmp_path) -> None:
    tree = _tree(tmp_path)
    cfg = _config(tmp_path, tree, "whoosh")
    with _Opened(cfg) as ix:
        ix.run_pass(progress=False)
    with _Opened(cfg, live=True) as ix:  # it answers searches
        assert ix.opened_index is not None
