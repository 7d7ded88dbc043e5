"""Watching a tree of any depth: the one change indexerd makes to watchdog.

watchdog (version 7) walks a directory with ``os.walk`` when its inotify emitter adds the watches
of a tree and when a directory moves in (``watchdog.observers.inotify``), and when it makes the
``created`` events of a moved-in directory's contents (``watchdog.events``).  On Python 3.11
``os.walk`` recurses once per directory level, so a tree about 980 levels deep raises
``RecursionError`` in the emitter's thread; the thread ends, and with it the watch of the *whole*
tree, not only of the deep part.  :func:`install` gives those modules an ``os`` whose ``walk`` is
:func:`walk_iteratively` (the same top-down order, the same pruning through ``dirnames``), and
every other name of ``os`` unchanged.  Paths longer than the kernel's ``PATH_MAX`` still cannot
be watched: watchdog skips such a directory (its ``inotify_add_watch`` fails), and scheduled
reconciles keep it current.
"""

from __future__ import annotations

import logging
import os
import threading
import types
from typing import Callable, Iterator

log = logging.getLogger(__name__)

__all__ = ["install", "walk_iteratively", "WRITTEN_FOR_MAJOR"]

#: The watchdog major version whose ``watchdog.observers.inotify`` walks with ``os.walk``.
WRITTEN_FOR_MAJOR = 7

_lock = threading.Lock()
_installed: bool | None = None


def walk_iteratively(top, topdown: bool = True, onerror: Callable[[OSError], object] | None = None,
                     followlinks: bool = False) -> Iterator[tuple]:
    """``os.walk(top)`` top-down with a stack instead of recursion: yields ``(dirpath, dirnames,
    filenames)`` in the same order (a directory before its subdirectories, those in listing
    order), and a caller that removes names from ``dirnames`` prunes them, as with ``os.walk``.
    ``top`` may be ``str`` or ``bytes`` (the paths yielded are of its type).  A directory that
    cannot be listed is passed to ``onerror`` (when given) and skipped.  Only top-down walks are
    supported (``topdown=False`` raises ``ValueError``): watchdog asks for nothing else.
    """
    if not topdown:
        raise ValueError("walk_iteratively walks top-down only")
    stack = [os.fspath(top)]
    while stack:
        path = stack.pop()
        dirs: list = []
        nondirs: list = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else nondirs).append(entry.name)
        except OSError as e:
            if onerror is not None:
                onerror(e)
            continue
        yield path, dirs, nondirs
        for name in reversed(dirs):
            sub = os.path.join(path, name)
            if followlinks or not os.path.islink(sub):
                stack.append(sub)


class _OsWithIterativeWalk(types.ModuleType):
    """``os`` as one module sees it: :func:`walk_iteratively` for ``walk``, the rest ``os``'s."""

    walk = staticmethod(walk_iteratively)

    def __getattr__(self, name: str):
        return getattr(os, name)


def install() -> bool:
    """Give watchdog's modules that walk trees the iterative walk, once per process, when the installed
    watchdog is :data:`WRITTEN_FOR_MAJOR` and its module walks with ``os.walk``.  Returns True
    when installed; otherwise logs one warning (a tree too deep for the recursive walk then
    loses its watch, reported by the watcher and kept current by reconciles).  Thread-safe."""
    global _installed
    with _lock:
        if _installed is None:
            _installed = _install()
        return _installed


def _install() -> bool:
    try:
        from watchdog import events
        from watchdog.observers import inotify
        from watchdog.version import VERSION_MAJOR
    except ImportError:  # not Linux's inotify: nothing to change
        return False
    modules = (inotify, events)
    if VERSION_MAJOR != WRITTEN_FOR_MAJOR or any(getattr(m, "os", None) is not os for m in modules):
        log.warning("watchdog %s is not the version indexerd's deep-tree walk was written for (%d): "
                    "a tree about 980 levels deep will lose its watch", VERSION_MAJOR, WRITTEN_FOR_MAJOR)
        return False
    walking_os = _OsWithIterativeWalk("os")
    for module in modules:
        module.os = walking_os  # type: ignore[attr-defined]
    return True
