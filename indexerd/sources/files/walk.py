"""The walk of a tree: every selected file with its stat, one ``os.scandir`` per directory, in
the order of the files' keys.

The walk yields each file as it is found, depth first, the entries of each directory sorted by
the key each will have (a directory's name with ``/`` after it: everything below it comes
there), so the files arrive in ascending key order -- the order of the store's key index -- and
the reconcile (:meth:`indexerd.sources.files.scan.FileSource.scan`) merges them with the stored
rows read in chunks, holding neither list in memory (only the directories on the current path
and the files that changed).

Symlinks are not followed unless asked; when they are, each directory is entered once per
(st_dev, st_ino), so a loop ends at once, and a file reached through a link is keyed by its real
path -- a key anywhere in the order, so such a file is yielded with ``in_order`` False.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from operator import itemgetter
from typing import Iterator, NamedTuple
from urllib.parse import quote_from_bytes

from indexerd.sources.files.globs import PathMatcher
from indexerd.core.filekeys import URI_SAFE, path_to_key
from indexerd.sources.files.keys import display_path

log = logging.getLogger("indexerd.sources.files.scan")  # the scan's logger, as before the split

__all__ = ["Unlisted", "WalkedFile", "walk", "walk_runs"]


class WalkedFile(NamedTuple):
    """One selected file: its key, path and stat; ``in_order`` False when it was reached
    through a symlink (keyed by its real path, out of the walk's key order)."""

    key: str
    path: str
    stat: os.stat_result
    in_order: bool


@dataclass(frozen=True)
class Unlisted:
    """A directory that could not be listed: nothing below ``prefix`` (its key and ``/``) may
    be deleted this pass."""

    path: str
    prefix: str


def _key_name(name: str) -> str:
    """A directory entry's name as its key spells it (percent-encoded as :func:`path_to_key`)."""
    return name if URI_SAFE.fullmatch(name) else quote_from_bytes(os.fsencode(name))


def walk(root: str, matcher: PathMatcher, *, follow_symlinks: bool, start: str | None = None,
         on_file=None) -> Iterator[WalkedFile | Unlisted]:
    """Walk the tree (or the subtree ``start``) with ``os.scandir``; nothing is read.

    Yields :class:`WalkedFile` in ascending key order (those with ``in_order`` False aside) and
    an :class:`Unlisted` where a directory could not be listed (logged; first of all when the
    top itself cannot be).  ``on_file(n)`` is called after each directory with the number of
    files it holds (progress).
    """
    for item in walk_runs(root, matcher, follow_symlinks=follow_symlinks, start=start, on_file=on_file):
        if isinstance(item, Unlisted):
            yield item
        else:
            yield from item


def walk_runs(root: str, matcher: PathMatcher, *, follow_symlinks: bool, start: str | None = None,
              on_file=None) -> Iterator[list[WalkedFile] | Unlisted]:
    """:func:`walk` a run at a time: each list holds the files one directory lists between two
    of its subdirectories (all of a leaf directory's), in the order :func:`walk` yields them.
    A pass over a million files spends less per file on a list than on a generator's step.
    """
    follow = follow_symlinks
    top = start or root
    visited: set[tuple[int, int]] = set()
    try:
        st_top = os.stat(top)
        visited.add((st_top.st_dev, st_top.st_ino))
    except OSError:
        pass
    # a start reached through a link (``ln -s . again``) keys its files by their real paths,
    # as every other file reached through a link
    through_link = follow and os.path.realpath(top) != top
    top_rel = "" if top == root else os.path.relpath(top, root).replace(os.sep, "/")
    # hot loop: bind what it calls; build the relative path only when a pattern needs it
    needs_rel = matcher.needs_rel
    exc_name = matcher.exc_file_name_match
    inc_all = matcher.include_all
    safe = URI_SAFE.fullmatch

    def listing(dirpath: str, rel: str, via_link: bool):
        """The selected entries of one directory sorted by key: ``(sort name, file or None,
        subdirectory or None)``; None when it cannot be listed."""
        try:
            it = os.scandir(dirpath)
        except OSError as e:
            log.warning("cannot list directory %s: %s", display_path(dirpath), e.strerror)
            return None
        entries: list[tuple[str, WalkedFile | None, tuple[str, str, bool] | None]] = []
        n_files = 0
        # the keys of this directory's plain files: the directory's key and the name, when
        # neither needs percent-encoding (one test of the directory, not one of each path)
        key_dir = "file://" + dirpath.rstrip("/") + "/" if not via_link and safe(dirpath) else None
        with it:
            for entry in it:
                name = entry.name
                try:
                    is_link = entry.is_symlink()
                    if is_link and not follow:
                        continue
                    if entry.is_dir(follow_symlinks=follow):
                        erel = f"{rel}/{name}" if rel else name
                        if matcher.dir_excluded(name, erel):
                            continue
                        if follow:
                            st = entry.stat(follow_symlinks=True)
                            ident = (st.st_dev, st.st_ino)
                            if ident in visited:
                                log.debug("not entering %s again (symlink loop or second link)",
                                          display_path(entry.path))
                                continue
                            visited.add(ident)
                        entries.append((_key_name(name) + "/", None, (entry.path, erel, via_link or is_link)))
                        continue
                    if exc_name is not None and exc_name(name):
                        continue
                    if needs_rel or not inc_all:
                        if not matcher.file_selected(name, f"{rel}/{name}" if rel else name):
                            continue
                    st = entry.stat(follow_symlinks=follow)
                except OSError as e:  # vanished between listing and stat, or a dangling link
                    log.debug("cannot stat %s: %s", display_path(entry.path), e.strerror)
                    continue
                n_files += 1
                if key_dir is not None and not is_link and safe(name):
                    entries.append((name, WalkedFile(key_dir + name, entry.path, st, True), None))
                    continue
                linked = is_link or via_link
                path = os.path.realpath(entry.path) if linked else entry.path
                key = "file://" + path if safe(path) else path_to_key(path)
                entries.append((name if safe(name) else _key_name(name), WalkedFile(key, path, st, not linked), None))
        entries.sort(key=itemgetter(0))
        if on_file is not None and n_files:
            on_file(n_files)
        return entries

    first = listing(top, top_rel, through_link)
    if first is None:
        yield Unlisted(top, path_to_key(top).rstrip("/") + "/")
        return
    stack = [(first, 0)]  # (a directory's sorted entries, the next one to take)
    while stack:
        entries, at = stack.pop()
        run: list[WalkedFile] = []
        for i in range(at, len(entries)):
            _, walked, subdir = entries[i]
            if walked is not None:
                run.append(walked)
                continue
            if run:
                yield run
                run = []
            stack.append((entries, i + 1))
            dirpath, rel, via_link = subdir
            below = listing(dirpath, rel, via_link)
            if below is None:
                yield Unlisted(dirpath, path_to_key(dirpath).rstrip("/") + "/")
            else:
                stack.append((below, 0))
            break
        else:
            if run:
                yield run
