"""``file:`` keys and the stat facts of local files: path <-> key, the racy-ctime rule, display.

Keys are ``file:`` URIs of the real path as ``pathlib.Path.as_uri()`` writes them: bytes that are
not UTF-8 are percent-encoded, and :func:`key_to_path` maps a key back to the same bytes.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote_from_bytes, unquote_to_bytes

URI_SAFE = re.compile(r"[A-Za-z0-9_.~/-]*")  # characters quote() leaves alone (safe="/")


def path_to_key(path: str) -> str:
    """Absolute path (str, may hold surrogate escapes) -> ``file:`` URI, as ``Path.as_uri()``."""
    if URI_SAFE.fullmatch(path):  # the common case: nothing to percent-encode (3x faster)
        return "file://" + path
    return "file://" + quote_from_bytes(os.fsencode(path))


def key_to_path(key: str) -> str:
    """``file:`` URI -> path str whose ``os.fsencode`` gives back the original bytes."""
    if not key.startswith("file://"):
        raise ValueError(f"not a file key: {key!r}")
    return os.fsdecode(unquote_to_bytes(key[len("file://"):]))


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
    """A stored record's ``(mtime_ns, size, ctime_ns, ino, reason)``, as :meth:`Store.stat_map`."""
    return (rec.mtime_ns, rec.size, rec.ctime_ns, rec.ino, rec.reason)


def display_path(path: str) -> str:
    """A path safe to print or store as text: undecodable bytes shown as U+FFFD."""
    return os.fsencode(path).decode("utf-8", "replace")
