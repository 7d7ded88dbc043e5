"""What ``ctl search``'s fast path (:mod:`indexerd.cli.entry`) read from a config file last time,
so that it need not import ``tomllib`` to read it again.

The fast path needs two top-level keys of the config, ``state_dir`` and ``control_socket``, to
find the daemon.  Importing ``tomllib`` (with ``typing``, ``string``, ``datetime``) costs more
than the daemon's whole answer to a query (bench/RESULTS.md), so the keys read from one config
file are kept in one small file, with the file's identity when it was read: device, inode, size,
modification and change times in nanoseconds.  The next call uses them only while ``stat()`` of
the config gives the same identity; any change to the file (an edit, a rename over it, a
``chmod``) changes its change time, and the file is parsed again.  A file modified less than
:data:`SETTLE_SECONDS` before it was read is not memorised (an edit within the same timestamp
tick would keep the identity: Git's "racily clean" entries, ``Documentation/technical/racy-git.txt``
in Git's sources).

A stale memo cannot change an answer: it is not used once the file's identity changed, and a
socket where nobody answers, or a daemon serving another state dir, sends the fast path to the
full command line, which reads the config itself.  A memo is only read from a regular file owned
by this user and writable by nobody else: whoever can write it could as well edit this user's
config or programs (the trust of ``~/.cache`` is the trust of the home directory).

The file: ``$XDG_CACHE_HOME/indexerd/ctl-config`` (``~/.cache/indexerd/ctl-config``), mode
0600, NUL-separated fields (no path holds NUL): a format tag, the config path, the five numbers,
then each key as ``=value`` or ``-`` (unset).  It is replaced atomically; when it cannot be
written (a read-only home), nothing is memorised and nothing fails.
"""

from __future__ import annotations

import os
import stat

FORMAT = b"indexerd-ctl-config-1"
#: a config modified less than this long before it is read is not memorised (seconds)
SETTLE_SECONDS = 2.0
KEYS = ("state_dir", "control_socket")


def memo_path() -> str:
    """``$XDG_CACHE_HOME/indexerd/ctl-config``, else ``~/.cache/indexerd/ctl-config`` (the XDG
    base directory rule for caches)."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not os.path.isabs(base):
        base = os.path.expanduser("~/.cache")
    return os.path.join(base, "indexerd", "ctl-config")


def identity(st: os.stat_result) -> list[bytes]:
    """The fields of a config file's identity (device, inode, size, mtime_ns, ctime_ns)."""
    return [str(n).encode() for n in (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)]


def recall(path: str, st: os.stat_result) -> dict | None:
    """The keys memorised for the config file ``path`` whose ``stat()`` is ``st``, or None
    (no memo, another file, the file changed, an unreadable or foreign memo)."""
    try:
        # not a FIFO or device left in its place: never block, read only a regular file
        fd = os.open(memo_path(), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st_memo = os.fstat(fd)
        if not stat.S_ISREG(st_memo.st_mode) or st_memo.st_uid != os.geteuid() or st_memo.st_mode & 0o022:
            return None                          # only a file of this user that only it may write
        fields = os.read(fd, 65536).split(b"\0")
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(fields) != 3 + 5 + len(KEYS) or fields[0] != FORMAT or fields[1] != os.fsencode(path):
        return None
    if fields[2:7] != identity(st) or fields[-1] != b"":
        return None
    keys = {}
    for name, value in zip(KEYS, fields[7:7 + len(KEYS)]):
        if value.startswith(b"="):
            keys[name] = os.fsdecode(value[1:])
        elif value != b"-":
            return None
    return keys


def remember(path: str, st: os.stat_result, keys: dict, now_ns: int) -> None:
    """Memorise ``keys`` (strings, as read from the config ``path`` whose ``stat()`` is ``st``)
    unless the file changed less than :data:`SETTLE_SECONDS` before ``now_ns`` (UTC epoch
    nanoseconds); errors are ignored (module docstring)."""
    if now_ns - max(st.st_mtime_ns, st.st_ctime_ns) < SETTLE_SECONDS * 1e9:
        return
    values = []
    for name in KEYS:
        v = keys.get(name)
        values.append(b"-" if v is None else b"=" + os.fsencode(v))
    fields = [FORMAT, os.fsencode(path), *identity(st), *values, b""]
    if any(b"\0" in f for f in fields):
        return
    target = memo_path()
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, b"\0".join(fields))
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
