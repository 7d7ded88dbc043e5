"""The live changes taken from the change queue, shared out among the change workers.

The daemon's change workers (:mod:`indexerd.daemon.live`) apply several changes at once, so that
one slow document (a parse that takes its whole extraction bound) never delays the others.  The
board keeps what they may not do at once apart: two changes *touch* when their paths are the
same, or one is a directory above the other (a directory's change scans or removes what is below
it).  A change is handed out only when it touches no change being applied and no change that
waits before it, so the changes of one path, and of a directory and what is below it, are applied
one at a time in the order they came due; the others do not wait for them.

At most one change waits per path: a later one of a waiting path merges into it (the path is
read again when it is applied, so one read of it is enough), as in the change queue
(:class:`~indexerd.sources.files.watch.ChangeQueue`).  So does a change below a waiting one, and
a waiting change below a new one: a directory's change reconciles everything below it when it is
applied, so the changes below it have nothing left to do.  A tree moved in thus waits as one
change, not one per directory level (a 1,100-level tree made 1,100 waiting changes, each claim
then tested every one against the others under the board's lock, and the daemon stopped
answering).  Thread-safe.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator

from indexerd.sources.files.watch import Change


def _above(path: str) -> Iterator[str]:
    """The directories above ``path`` (``/a/b/c`` -> ``/a/b``, ``/a``, ``/``)."""
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return
        yield parent
        path = parent


class _PathSet:
    """Paths, and the directories above them, for the "touches" test in O(depth)."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.above: Counter[str] = Counter()

    def touches(self, path: str) -> bool:
        """``path`` is one of the paths, a directory above one, or below one."""
        return path in self.paths or path in self.above or any(p in self.paths for p in _above(path))

    def add(self, path: str) -> None:
        self.paths.add(path)
        self.above.update(_above(path))

    def remove(self, path: str) -> None:
        self.paths.discard(path)
        self.above.subtract(_above(path))
        for parent in _above(path):
            if self.above[parent] <= 0:
                del self.above[parent]


class ChangeBoard:
    """Changes waiting for a change worker, in the order they came due, and those being applied.

    :meth:`add` the changes the queue gave; each worker :meth:`claim` s one, applies it, and
    :meth:`release` s it.  Thread-safe.
    """

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._waiting: dict[str, Change] = {}  # path -> change, in the order they came due
        self._waiting_paths = _PathSet()       # the same paths, for the "below a waiting one" test
        self._applying = _PathSet()

    def add(self, changes: Iterable[Change]) -> None:
        """Queue ``changes`` (oldest due first) behind those waiting.  One of a path already
        waiting, or below a waiting path, merges into it (keeping its place and its first event's
        time); waiting changes below a new one merge into the new one."""
        with self._cv:
            for change in changes:
                path = change.path
                into = self._waiting.get(path) or next(
                    (self._waiting[p] for p in _above(path) if p in self._waiting), None)
                if into is not None:
                    if into.path == path:
                        into.was_dir = into.was_dir or change.was_dir
                        into.source = change.source
                    into.first = min(into.first, change.first)
                    continue
                if path in self._waiting_paths.above:  # waiting changes below it: it covers them
                    below = path.rstrip("/") + "/"
                    for p in [p for p in self._waiting if p.startswith(below)]:
                        change.first = min(change.first, self._waiting.pop(p).first)
                        self._waiting_paths.remove(p)
                self._waiting[path] = change
                self._waiting_paths.add(path)
            self._cv.notify_all()

    def claim(self, timeout_seconds: float) -> Change | None:
        """The first waiting change that touches no change being applied nor one waiting before
        it, now being applied (:meth:`release` it when done); None when there is none within
        ``timeout_seconds``."""
        deadline = time.monotonic() + timeout_seconds
        with self._cv:
            while True:
                change = self._first_free()
                if change is not None:
                    del self._waiting[change.path]
                    self._waiting_paths.remove(change.path)
                    self._applying.add(change.path)
                    return change
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)

    def _first_free(self) -> Change | None:
        held = _PathSet()  # the waiting ones passed over: what touches them waits behind them
        for change in self._waiting.values():
            if self._applying.touches(change.path) or held.touches(change.path):
                held.add(change.path)
                continue
            return change
        return None

    def release(self, change: Change) -> None:
        """``change`` (from :meth:`claim`) is applied: the changes it held back may go."""
        with self._cv:
            self._applying.remove(change.path)
            self._cv.notify_all()

    def wake(self) -> None:
        """Wake every waiting :meth:`claim` (to look at a stop event)."""
        with self._cv:
            self._cv.notify_all()

    def waiting(self) -> int:
        """Changes waiting (not yet being applied)."""
        with self._cv:
            return len(self._waiting)

    def applying(self) -> int:
        """Changes being applied now."""
        with self._cv:
            return len(self._applying.paths)
