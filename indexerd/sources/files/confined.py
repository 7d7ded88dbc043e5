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
import stat as stat_mod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from indexerd.sources.files.keys import display_path

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


def confine(root: str, path: str, *, follow_symlinks: bool, source: str) -> str:
    """The path a control request may name: ``path`` itself, checked to be inside ``root``.  A
    source that does not follow symlinks refuses a symlink anywhere below the root (directories
    and the file itself); one that does takes the real path, which must still be inside the root.

    Args:
        source: the source's name, for messages.

    Raises:
        ValueError: naming the path and why (not absolute, ``..`` or ``.`` components,
            outside the root, through a symlink).
    """
    if not os.path.isabs(path):
        raise ValueError(f"{display_path(path)}: not an absolute path")
    if follow_symlinks:
        real = os.path.realpath(path)
        if not (real == root or real.startswith(root.rstrip("/") + "/")):
            raise ValueError(f"{display_path(path)}: resolves to {display_path(real)}, outside "
                             f"source {source} ({display_path(root)})")
        return real
    names = names_below(root, path)
    try:
        with open_dir(root, names[:-1]) as dfd:
            if dfd is not None and names and stat_mod.S_ISLNK(
                    os.stat(names[-1], dir_fd=dfd, follow_symlinks=False).st_mode):
                raise NotARealDirectory(f"{names[-1]!r} is a symlink")
    except FileNotFoundError:
        pass  # a vanished file: its document is deleted
    except NotARealDirectory as e:
        raise ValueError(f"{display_path(path)}: {e} (source {source} does not follow "
                         f"symlinks)") from None
    return path


def open_below(root: str, path: str, *, follow_symlinks: bool) -> int:
    """A read-only descriptor of the file at ``path`` (below ``root``).  Unless symlinks are
    followed, every component is opened without following one (:func:`open_file`), so a
    directory swapped for a symlink between the listing (or the event) and the read cannot lead
    outside the tree.

    Raises:
        FileNotFoundError, NotARealDirectory, OSError.
    """
    if follow_symlinks:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    return open_file(root, names_below(root, path))


def stat_below(root: str, path: str, *, follow_symlinks: bool) -> os.stat_result | None:
    """The stat of ``path`` below ``root`` (None: missing, or not reachable without following a
    symlinked directory when symlinks are not followed)."""
    if follow_symlinks:
        try:
            return os.stat(path)
        except OSError:
            return None
    try:
        return lstat(root, names_below(root, path))
    except NotARealDirectory:
        return None
