"""A stored file's original, opened for the search page's download (``/raw``), only where a
configured tree's confinement allows it.

The rule: the ``file:`` key's path must lie below the root of a configured tree source, be
selected by its include/exclude rules, and open through
:func:`indexerd.sources.files.confined.open_below` as that source reads it -- one component at a
time without following a symlink (unless the source sets ``follow_symlinks``, whose real path
must still lie inside the root: :meth:`FileSource.confine`) -- and be a regular file.  Anything
else (a key of no tree, a path with ``..``, a symlink out of the tree, a directory, a file gone)
is None: the caller answers 404 without saying which.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterable
from typing import NamedTuple

from indexerd.sources.base import trees
from indexerd.sources.files import confined
from indexerd.core.filekeys import key_to_path


class Original(NamedTuple):
    """An open original: ``fd`` (read-only; the caller closes it), ``size_bytes`` and
    ``filename`` (the last path component, str with surrogate escapes for undecodable bytes)."""

    fd: int
    size_bytes: int
    filename: str


def open_original(key: str, sources: Iterable) -> Original | None:
    """The original of the ``file:`` document ``key`` among ``sources`` (the configured
    :class:`~indexerd.sources.base.Source` objects), opened read-only, or None (module
    docstring: not a file key, in no tree, refused by the tree's rules or confinement, not a
    regular file, unreadable)."""
    if not key.startswith("file://"):
        return None
    try:
        path = key_to_path(key)
    except ValueError:
        return None
    if "\0" in path or not os.path.isabs(path):
        return None
    for src in trees(sources):
        if path == src.root or not src.contains(path):
            continue
        follow = bool(getattr(getattr(src, "cfg", None), "follow_symlinks", False))
        try:
            checked = src.confine(path)        # ValueError: '..', outside, through a symlink
            if not src.accepts(checked, False):
                return None
            fd = confined.open_below(src.root, checked, follow_symlinks=follow)
        except (ValueError, OSError):
            return None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        if not stat_mod.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)  # opened O_NONBLOCK (a FIFO must not hang the open)
        return Original(fd, st.st_size, os.path.basename(path))
    return None
