"""The change test of a local file: may its last verdict stand without reading it?  Pure: stat
values in, a bool out."""

from __future__ import annotations

import os


#: Verdicts that never stand: the document was not judged (``environment``: this machine failed
#: to read it, :class:`~indexerd.core.errors.EnvironmentFailure`), so it is read again.
READ_AGAIN_REASONS = frozenset({"environment"})


def unchanged(stored: tuple, st: os.stat_result, max_size_bytes: int) -> bool:
    """The change test: may this file's last verdict stand without reading it?

    ``stored`` is ``(mtime_ns, size, ctime_ns, ino, reason)`` from :meth:`Store.stat_rows` (without the key).
    Unchanged when mtime (ns), size, ctime (ns) and inode number all equal the stored ones,
    except a ``too-large`` skip that now fits under a raised ``max_size`` (``max_size_bytes``).  The ctime is
    what catches a rewrite that keeps size and mtime (``cp -p``, ``rsync -t``,
    ``SOURCE_DATE_EPOCH`` builds, a restored backup, a same-size write within one mtime
    tick): the kernel sets it on every change and nothing can set it back; the inode
    catches a file replaced by another (rename over it).  The device number is not used:
    it is not stable across reboots for many file systems, and would make every file be
    read again.  A row without ctime (written before schema 5) is judged on mtime and size
    alone, once: the scan then records its ctime and inode as they are (a baseline, no
    read).  A verdict of :data:`READ_AGAIN_REASONS` never stands.  A stored ctime of 0 means the stat was taken within :data:`~indexerd.sources.files.keys.RACY_WINDOW_NS` of a
    change (see :func:`~indexerd.sources.files.keys.trusted_ctime_ns`): the file is read again.  A ctime that moved
    without a content change (chmod, touch) costs one read; the content hash then keeps the
    document as it is.
    """
    mtime_ns, size, ctime_ns, ino, reason = stored
    if reason in READ_AGAIN_REASONS:
        return False
    if mtime_ns != st.st_mtime_ns or size != st.st_size:
        return False
    if ctime_ns is not None and ctime_ns != st.st_ctime_ns:
        return False
    if ino is not None and ino != st.st_ino:
        return False
    if reason == "too-large" and st.st_size <= max_size_bytes:
        return False
    return True
