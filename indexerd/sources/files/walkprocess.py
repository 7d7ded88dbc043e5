"""The walk of a large tree in a process of its own, so that the kernel's ``stat`` of every file
(on one core) overlaps the reconcile's read of the stored rows and its merge (on another).

:func:`walk_runs_elsewhere` starts ``python -m indexerd.sources.files.walkprocess`` (a fresh
interpreter: no fork of a threaded daemon), which runs the very walk of the pass
(:func:`indexerd.sources.files.walk.walk_runs`, symlinks not followed) and streams each run of
files as its keys and ``(st_mtime_ns, st_size, st_ctime_ns, st_ino)``: everything the reconcile's
change test compares (:func:`indexerd.sources.files.change.unchanged`).  A run whose stats are
not all the stored ones is stat'ed again by the pass (:meth:`WalkedElsewhere.files`), so what is
read, indexed or deleted is decided on the pass's own ``os.stat_result``, as with the walk in
process.  Frames: a 4-byte big-endian length, then a MessagePack array of items (msgspec).

The reconcile uses it when the source holds at least :data:`WALK_PROCESS_MIN_FILES` documents
and does not follow symlinks (:func:`walks_elsewhere`); below that,
a process's start (~50 ms) costs more than the overlap saves.  The walk's warnings (a directory
that cannot be listed) are logged by the pass, under the walk's logger.

Raises (while iterating): :class:`~indexerd.core.errors.EnvironmentFailure` when the process
cannot be started or ends without finishing the walk: the pass then fails before it deletes
anything, as a pass whose walk raised.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import struct
import subprocess
import sys
from operator import itemgetter
from typing import Callable, Iterator, NamedTuple

import msgspec

from indexerd.core.errors import EnvironmentFailure
from indexerd.core.filekeys import key_to_path
from indexerd.sources.files.walk import Unlisted, WalkedFile

__all__ = ["WALK_PROCESS_MIN_FILES", "WalkedElsewhere", "walk_runs_elsewhere", "walks_elsewhere"]

log = logging.getLogger("indexerd.sources.files.scan")  # the walk's logger, as in process

#: A source with at least this many stored documents walks its tree in a process of its own.
WALK_PROCESS_MIN_FILES = 50_000
#: Files per frame the walking process sends (about 60 KB of names and stats).
_FILES_PER_FRAME = 2000
_HEADER = struct.Struct(">I")
_FIRST = itemgetter(0)
#: ``fcntl`` command that sets a pipe's capacity (Linux, ``F_SETPIPE_SZ``), and the capacity asked
#: (bytes; an unprivileged process may ask up to ``/proc/sys/fs/pipe-max-size``, 1 MiB by default)
_F_SETPIPE_SZ, _PIPE_BYTES = 1031, 1024 * 1024
#: A frame larger than this is not one the walker wrote (bytes).
_MAX_FRAME_BYTES = 256 * 1024 * 1024
_Stat = tuple[int, int, int, int]


class _Run(msgspec.Struct, array_like=True, tag="r"):
    """Files of one directory: their keys are ``key_dir + name`` (``name`` as keys spell it)."""
    key_dir: str
    names: list[str]
    stats: list[_Stat]


class _Unlisted(msgspec.Struct, array_like=True, tag="u"):
    path: str
    prefix: str


class _Seen(msgspec.Struct, array_like=True, tag="n"):
    """Files the walk found since the last count (the pass's progress)."""
    files: int


class _Log(msgspec.Struct, array_like=True, tag="l"):
    level: int
    message: str


class _End(msgspec.Struct, array_like=True, tag="e"):
    """The walk is over."""


_Item = _Run | _Unlisted | _Seen | _Log | _End


class WalkedElsewhere(NamedTuple):
    """A run of files walked by the other process: their keys in walk order and each one's
    ``(st_mtime_ns, st_size, st_ctime_ns, st_ino)`` as the walk saw it."""

    keys: list[str]
    stats: list[_Stat]

    def files(self) -> list[WalkedFile]:
        """The run as :func:`~indexerd.sources.files.walk.walk_runs` yields it, each file
        stat'ed again here (``lstat``: symlinks are not followed); a file gone since the walk
        is left out (the reconcile then finds it gone)."""
        out = []
        for key in self.keys:
            path = key_to_path(key)
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            out.append(WalkedFile(key, path, st, True))
        return out


def walks_elsewhere(store, source: str, start: str | None, follow_symlinks: bool) -> bool:
    """Whether a reconcile of ``source`` walks in a process of its own: a whole tree (``start``
    None) whose source holds :data:`WALK_PROCESS_MIN_FILES` documents or more in ``store`` (its
    kept counts: no scan of its rows), symlinks not followed."""
    if start is not None or follow_symlinks:
        return False
    return sum(store.counts_by_source().get(source, {}).values()) >= WALK_PROCESS_MIN_FILES


def walk_runs_elsewhere(root: str, include: list[str], exclude: list[str], *, start: str | None = None,
                        on_file: Callable[[int], None] | None = None) -> Iterator[WalkedElsewhere | Unlisted]:
    """:func:`~indexerd.sources.files.walk.walk_runs` of ``root`` (or the subtree ``start``)
    with the include/exclude globs ``include``/``exclude``, symlinks not followed, in a process
    of its own; yields its runs as :class:`WalkedElsewhere` and its :class:`Unlisted`
    directories, in the walk's order.  ``on_file(n)``: n more files found (progress).  Closing
    the generator ends the process.

    Raises:
        EnvironmentFailure: the process cannot be started, or ended before the walk did.
    """
    argv = [sys.executable, "-m", "indexerd.sources.files.walkprocess"]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
    except OSError as e:
        raise EnvironmentFailure(f"cannot start the walk's process ({argv[0]}): {e.strerror or e}") from None
    assert proc.stdin is not None and proc.stdout is not None  # Popen(PIPE)
    try:  # room for the walk to run ahead of the merge (Linux; the default is 64 KiB)
        fcntl.fcntl(proc.stdout.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:
        pass
    decode = msgspec.msgpack.Decoder(list[_Item]).decode
    try:
        try:
            proc.stdin.write(json.dumps({"root": root, "start": start, "include": include,
                                         "exclude": exclude}).encode("utf-8") + b"\n")
            proc.stdin.close()
        except OSError:
            pass  # it ended already: what it left unsaid is reported below
        stdout = proc.stdout
        while True:
            header = stdout.read(_HEADER.size)
            (size,) = _HEADER.unpack(header) if len(header) == _HEADER.size else (None,)
            if size is None or size > _MAX_FRAME_BYTES:
                raise EnvironmentFailure(f"the walk's process ended before the walk did "
                                         f"({_exit(proc)}): nothing is deleted this pass")
            payload = stdout.read(size)
            if len(payload) != size:
                raise EnvironmentFailure(f"the walk's process ended mid-frame ({_exit(proc)}): "
                                         f"nothing is deleted this pass")
            for item in decode(payload):
                if isinstance(item, _Run):
                    key_dir = item.key_dir
                    yield WalkedElsewhere([key_dir + name for name in item.names], item.stats)
                elif isinstance(item, _Unlisted):
                    yield Unlisted(item.path, item.prefix)
                elif isinstance(item, _Seen):
                    if on_file is not None:
                        on_file(item.files)
                elif isinstance(item, _Log):
                    log.log(item.level, "%s", item.message)
                else:
                    return
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def _exit(proc: subprocess.Popen) -> str:
    """How ``proc`` ended, for a message (it closed its output: it is ending)."""
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return "still running"
    return f"killed by signal {-code}" if code < 0 else f"exit {code}"


# -- the walking process ------------------------------------------------------------------------
class _Frames:
    """The walker's output: items gathered into frames of about :data:`_FILES_PER_FRAME` files."""

    def __init__(self, out) -> None:
        self.out = out
        self.items: list[_Item] = []
        self.files = 0
        self.seen = 0
        self.encode = msgspec.msgpack.Encoder().encode

    def add(self, item: _Item, files: int = 0) -> None:
        self.items.append(item)
        self.files += files
        if self.files >= _FILES_PER_FRAME:
            self.flush()

    def flush(self) -> None:
        if self.seen:  # listed before the runs of this frame were taken from it
            self.items.insert(0, _Seen(self.seen))
            self.seen = 0
        if self.items:
            payload = self.encode(self.items)
            self.out.write(_HEADER.pack(len(payload)) + payload)
            self.out.flush()
            self.items, self.files = [], 0


class _Forward(logging.Handler):
    """The walk's log records, sent to the pass to be logged there."""

    def __init__(self, frames: _Frames) -> None:
        super().__init__(logging.DEBUG)
        self.frames = frames

    def emit(self, record: logging.LogRecord) -> None:
        self.frames.add(_Log(record.levelno, record.getMessage()))


def compact_runs(root: str, matcher, *, start: str | None = None,
                 on_file: Callable[[int], None] | None = None) -> Iterator[_Run | _Unlisted]:
    """:func:`~indexerd.sources.files.walk.walk_runs` with symlinks not followed, each run as
    its directory's key, its files' names as keys spell them and their stats -- the same files
    in the same order, made without a :class:`WalkedFile` or a path per file (the walking
    process's whole work: it sets the pace of the reconcile).  tests/test_walkprocess.py holds
    the two walks equal."""
    from indexerd.core.filekeys import URI_SAFE, path_to_key
    from indexerd.sources.files.keys import display_path
    from indexerd.sources.files.walk import _key_name

    safe = URI_SAFE.fullmatch
    needs_rel, exc_name, inc_all = matcher.needs_rel, matcher.exc_file_name_match, matcher.include_all
    top = start or root
    top_rel = "" if top == root else os.path.relpath(top, root).replace(os.sep, "/")

    def listing(dirpath: str, rel: str) -> list | None:
        """``(name as keyed [+ "/"], stat or None, (path, rel) of a subdirectory or None)``
        sorted, as walk_runs' listing; None when the directory cannot be listed."""
        try:
            it = os.scandir(dirpath)
        except OSError as e:
            log.warning("cannot list directory %s: %s", display_path(dirpath), e.strerror)
            return None
        entries: list = []
        n_files = 0
        with it:
            for entry in it:
                name = entry.name
                try:
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        erel = f"{rel}/{name}" if rel else name
                        if not matcher.dir_excluded(name, erel):
                            entries.append((_key_name(name) + "/", None, (entry.path, erel)))
                        continue
                    if exc_name is not None and exc_name(name):
                        continue
                    if (needs_rel or not inc_all) and \
                            not matcher.file_selected(name, f"{rel}/{name}" if rel else name):
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError as e:  # vanished between listing and stat
                    log.debug("cannot stat %s: %s", display_path(entry.path), e.strerror)
                    continue
                n_files += 1
                entries.append((name if safe(name) else _key_name(name),
                                (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino), None))
        entries.sort(key=_FIRST)
        if on_file is not None and n_files:
            on_file(n_files)
        return entries

    def key_dir(dirpath: str) -> str:
        key = path_to_key(dirpath)
        return key if key.endswith("/") else key + "/"

    def unlisted(dirpath: str) -> _Unlisted:
        return _Unlisted(dirpath, path_to_key(dirpath).rstrip("/") + "/")  # as walk_runs says it

    first = listing(top, top_rel)
    if first is None:
        yield unlisted(top)
        return
    stack = [(first, 0, key_dir(top))]  # (a directory's sorted entries, the next to take, its key)
    while stack:
        entries, at, kdir = stack.pop()
        names: list[str] = []
        stats: list[_Stat] = []
        for i in range(at, len(entries)):
            kname, st, subdir = entries[i]
            if subdir is None:
                names.append(kname)
                stats.append(st)
                continue
            if names:
                yield _Run(kdir, names, stats)
                names, stats = [], []
            stack.append((entries, i + 1, kdir))
            dirpath, rel = subdir
            below = listing(dirpath, rel)
            if below is None:
                yield unlisted(dirpath)
            else:
                stack.append((below, 0, kdir + kname))
            break
        else:
            if names:
                yield _Run(kdir, names, stats)


def main() -> int:
    """The walking process: one JSON line on stdin (``root``, ``start``, ``include``,
    ``exclude``), frames on stdout until an end item.  Exit 0, or 1 on a failure (printed to
    stderr; the pass sees the missing end)."""
    from indexerd.sources.files.globs import PathMatcher

    spec = json.loads(sys.stdin.buffer.readline())
    frames = _Frames(sys.stdout.buffer)
    walk_log = logging.getLogger("indexerd.sources.files.scan")
    walk_log.setLevel(logging.DEBUG)
    walk_log.propagate = False
    walk_log.addHandler(_Forward(frames))

    def seen(n: int) -> None:
        frames.seen += n

    matcher = PathMatcher(spec["include"], spec["exclude"])
    for item in compact_runs(spec["root"], matcher, start=spec["start"], on_file=seen):
        frames.add(item, len(item.names) if isinstance(item, _Run) else 0)
    frames.add(_End())
    frames.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the pass ended (cancelled, failed): nobody reads
        sys.exit(0)
