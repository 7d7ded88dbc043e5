"""Paths below a root, opened without following symlinks: nothing planted in a tree can redirect
a read, a write or a removal outside it.

Contract relied on (POSIX, Linux ``openat(2)``): ``O_NOFOLLOW`` makes the open of a symlink fail
with ``ELOOP`` (with ``O_DIRECTORY``, a non-directory fails with ``ENOTDIR``); a directory opened
as a descriptor stays the same directory however its path is renamed or replaced afterwards, so a
walk from the root one component at a time, each opened relative to its parent's descriptor,
cannot be sent elsewhere by a directory swapped for a symlink between two steps.

The root itself is opened normally (it may be a symlink: the configured place of a tree or a
mirror); nothing below it may be.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class NotARealDirectory(ValueError):
    """A component below the root is a symlink or not a directory (it cannot be walked into)."""


def names_below(root: str, path: str) -> list[str]:
    """The components of ``path`` below ``root`` (both absolute; ``[]`` for the root itself).

    Raises:
        NotARealDirectory: ``path`` is not below ``root`` or is not in normal form: a ``.`` or
            ``..`` component, an empty one (``//``) or a trailing ``/`` (a path with ``..``
            could name a file outside the root by text alone).
    """
    root = root.rstrip("/")
    if path == root or (root == "" and path == "/"):
        return []
    if not path.startswith(root + "/"):
        raise NotARealDirectory(f"{path!r} is not below {root or '/'!r}")
    names = path[len(root) + 1:].split("/")
    if any(n in ("", ".", "..") for n in names):
        raise NotARealDirectory(f"{path!r}: '.', '..' or an empty component (use the real path)")
    return names


@contextmanager
def open_dir(root: str | os.PathLike, names: Sequence[str], *, create: bool = False) -> Iterator[int | None]:
    """Yield a descriptor of the directory ``root/names[0]/...``, each component opened with
    ``O_DIRECTORY | O_NOFOLLOW`` relative to its parent (created with mode 0755 when ``create``);
    None when a component (or the root) is missing and ``create`` is false.  The descriptor is
    closed when the block ends.

    Raises:
        NotARealDirectory: a component is a symlink or a file.
        OSError: any other failure (EACCES...).
    """
    if create:
        os.makedirs(root, exist_ok=True)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        yield None
        return
    try:
        for name in names:
            if create:
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise
                yield None
                return
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotARealDirectory(f"refusing {name!r} under {os.fspath(root)}: not a real "
                                            f"directory (a symlink or a file)") from None
                raise
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


def open_file(root: str, names: Sequence[str], flags: int = FILE_FLAGS) -> int:
    """Open ``root/names...`` (a file: the last name) with ``O_NOFOLLOW`` at every step and
    return the descriptor (the caller closes it).

    Raises:
        FileNotFoundError: a component is missing.
        NotARealDirectory: a directory on the way is a symlink or a file, or the file itself is
            a symlink.
        OSError: any other failure.
    """
    if not names:
        raise NotARealDirectory(f"{root!r}: a directory, not a file")
    with open_dir(root, names[:-1]) as dfd:
        if dfd is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/".join([root, *names]))
        try:
            return os.open(names[-1], flags | os.O_NOFOLLOW, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise NotARealDirectory(f"refusing {names[-1]!r}: a symlink") from None
            raise


def lstat(root: str, names: Sequence[str]) -> os.stat_result | None:
    """``lstat`` of ``root/names...`` reached without following a symlinked directory; None when
    it is missing or a directory on the way is not a real directory."""
    if not names:
        try:
            return os.stat(root)
        except OSError:
            return None
    try:
        with open_dir(root, names[:-1]) as dfd:
            if dfd is None:
                return None
            return os.stat(names[-1], dir_fd=dfd, follow_symlinks=False)
    except (OSError, NotARealDirectory):
        return None
