"""The stat facts of local files: the racy-ctime rule, what a stored stat is, display.

Their keys (path <-> ``file:`` URI) are :mod:`indexerd.core.filekeys`.
"""

from __future__ import annotations

import os
import re

#: How close (ns) to the moment a file is read its ctime may be before a write in the same
#: timestamp tick could leave its stat unchanged: a file system that keeps whole seconds (ext3,
#: FAT's 2 s, some network file systems) ...
RACY_WINDOW_NS = 2_000_000_000
#: ... and one that keeps nanoseconds, whose clock moves once per kernel tick (1-10 ms)
RACY_WINDOW_FINE_NS = 50_000_000


def trusted_ctime_ns(ctime_ns: int, read_at_ns: int) -> int:
    """The ctime to store for a file read at ``read_at_ns`` (``time.time_ns()`` before the open):
    the ctime itself, or 0 when it is too close to the read (or after it) to be trusted -- a
    same-size write in that timestamp tick would leave the stat unchanged -- so the next scan or
    event reads the file again.  Too close: within :data:`RACY_WINDOW_NS` for a ctime in whole
    seconds (a coarse file system), within :data:`RACY_WINDOW_FINE_NS` otherwise.  The rule of
    Git's "racily clean" index entries (Documentation/technical/racy-git.txt in git.git)."""
    window = RACY_WINDOW_NS if ctime_ns % 1_000_000_000 == 0 else RACY_WINDOW_FINE_NS
    return 0 if ctime_ns >= read_at_ns - window else ctime_ns


def stat_of(rec) -> tuple:
    """A stored record's ``(mtime_ns, size, ctime_ns, ino, reason)``, as :meth:`Store.stat_rows` (without the key)."""
    return (rec.mtime_ns, rec.size, rec.ctime_ns, rec.ino, rec.reason)


#: the cap a ``too-large`` skip's detail names (``... max_size 20000000 ...``)
_MAX_SIZE_IN_DETAIL = re.compile(r"max_size (\d+)")


def too_large_stands(rec, st: os.stat_result, max_size_bytes: int) -> bool:
    """May a stored ``too-large`` skip of a file that fits ``max_size`` stand without a read?

    Such a skip came from inside the file -- it inflates past the cap (a ``.gz``, a ZIP member:
    a zip bomb) or passes a fixed bound (ZIP members, shared strings, the extraction worker's
    memory) -- so the stat test alone would read it at every pass.  It stands when ``st`` is
    the stat stored on ``rec`` (a :class:`~indexerd.core.store.DocumentRecord`; a ctime of 0,
    not to be trusted, never stands) and the ``max_size`` its detail names is not below
    ``max_size_bytes`` (a fixed bound names none), so raising ``max_size`` still retries it."""
    if rec.reason != "too-large" or rec.status != "skipped" or not rec.ctime_ns:
        return False
    if (rec.mtime_ns, rec.size, rec.ctime_ns, rec.ino) != \
            (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino):
        return False
    named = _MAX_SIZE_IN_DETAIL.search(rec.detail or "")
    return named is None or int(named.group(1)) >= max_size_bytes


def display_path(path: str) -> str:
    """A path safe to print or store as text: undecodable bytes shown as U+FFFD."""
    return os.fsencode(path).decode("utf-8", "replace")
