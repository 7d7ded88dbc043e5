"""The board that shares live changes among the change workers (indexerd.daemon.changeboard):
unrelated paths at once, one path and a directory with what is below it one at a time, in the
order they came due."""

from __future__ import annotations

import threading
import time

from indexerd.daemon.changeboard import ChangeBoard
from indexerd.sources.files.watch import Change


def ch(path: str, was_dir: bool = False, first: float = 0.0) -> Change:
    return Change("docs", path, was_dir, due=0.0, first=first)


def test_unrelated_paths_are_applied_at_once() -> None:
    board = ChangeBoard()
    board.add([ch("/t/slow.pdf"), ch("/t/a.txt"), ch("/t/sub/b.txt")])
    claimed = [board.claim(0.0) for _ in range(3)]
    assert [c.path for c in claimed] == ["/t/slow.pdf", "/t/a.txt", "/t/sub/b.txt"]
    assert (board.applying(), board.waiting()) == (3, 0)


def test_a_path_waits_for_its_own_change_and_its_directory() -> None:
    board = ChangeBoard()
    board.add([ch("/t/a.txt"), ch("/t/d", was_dir=True)])
    a, d = board.claim(0.0), board.claim(0.0)
    assert (a.path, d.path) == ("/t/a.txt", "/t/d")
    board.add([ch("/t/a.txt"), ch("/t/d/x/y.txt"), ch("/t2/z.txt")])
    # a.txt is being applied; y.txt is below d: only /t2/z.txt may go
    assert board.claim(0.0).path == "/t2/z.txt"
    assert board.claim(0.0) is None and board.waiting() == 2
    board.release(d)
    assert board.claim(0.0).path == "/t/d/x/y.txt"
    board.release(a)
    board.add([ch("/t", was_dir=True)])           # above y.txt (applied) and a.txt (waiting)
    assert board.waiting() == 1                   # /t's reconcile covers a.txt: merged into it
    assert board.claim(0.0) is None               # /t waits for y.txt, below it, being applied


def test_what_touches_a_waiting_change_waits_behind_it() -> None:
    board = ChangeBoard()
    board.add([ch("/t/d/a.txt")])
    a = board.claim(0.0)
    # /t/d (deleted) came due before /t/d/b.txt (created again): b waits behind d, which waits
    # for a; the unrelated one goes
    board.add([ch("/t/d", was_dir=True), ch("/t/other.txt")])
    assert board.claim(0.0).path == "/t/other.txt"
    assert board.claim(0.0) is None
    board.release(a)
    d = board.claim(0.0)
    assert d.path == "/t/d" and board.claim(0.0) is None
    board.add([ch("/t/d/b.txt")])                 # below d, being applied: waits for it
    assert board.claim(0.0) is None
    board.release(d)
    assert board.claim(0.0).path == "/t/d/b.txt"


def test_changes_below_a_waiting_directory_merge_into_it_whatever_the_order() -> None:
    """A tree moved in: a created event per directory level.  The board keeps one change (the
    directory's reconcile reads all below it), with the earliest first-event time; a directory
    coming after its children takes them in too; siblings stay apart."""
    board = ChangeBoard()
    busy = ch("/t/other.txt")
    board.add([busy])
    assert board.claim(0.0) is busy
    chain = ["/t/deep" + "/d" * i for i in range(1100)]
    board.add([ch(p, was_dir=True, first=float(i)) for i, p in enumerate(chain)])
    assert board.waiting() == 1
    t0 = time.monotonic()
    top = board.claim(0.0)
    assert time.monotonic() - t0 < 0.5 and (top.path, top.first) == ("/t/deep", 0.0)
    board.add([ch("/u/a/x.txt", first=3.0), ch("/u/b/y.txt"), ch("/u/a", was_dir=True, first=7.0)])
    assert board.waiting() == 2                   # /u/a took x.txt in (and its earlier time); y.txt apart
    assert board.claim(0.0).path == "/u/b/y.txt"  # /u/a came due last: its place is its own
    a = board.claim(0.0)
    assert (a.path, a.first) == ("/u/a", 3.0)


def test_a_waiting_path_merges_its_later_changes() -> None:
    board = ChangeBoard()
    board.add([ch("/t/x", first=5.0), ch("/t/y")])
    board.add([ch("/t/x", was_dir=True, first=9.0)])
    assert board.waiting() == 2
    x = board.claim(0.0)
    assert (x.path, x.was_dir, x.first) == ("/t/x", True, 5.0)


def test_a_claim_waits_for_a_release_or_its_timeout() -> None:
    board = ChangeBoard()
    board.add([ch("/t/a.txt"), ch("/t/a.txt")])
    a = board.claim(0.0)
    board.add([ch("/t/a.txt")])
    started = time.monotonic()
    assert board.claim(0.2) is None
    assert 0.2 <= time.monotonic() - started < 2.0
    threading.Timer(0.1, board.release, (a,)).start()
    again = board.claim(5.0)
    assert again is not None and again.path == "/t/a.txt"
