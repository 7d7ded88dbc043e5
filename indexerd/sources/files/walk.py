"""The walk of a tree: every selected file with its stat, and the directories that could not be listed.

Nothing is read: one ``os.scandir`` per directory gives names and stats.  Symlinks are not
followed unless asked; when they are, each directory is entered once per ``(st_dev, st_ino)``, so
a loop ends at once, and a file reached through a link is keyed by its real path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from indexerd.sources.files.globs import PathMatcher
from indexerd.sources.files.keys import URI_SAFE, display_path, path_to_key

__all__ = ["WalkResult", "walk_tree"]

log = logging.getLogger("indexerd.sources.files.scan")  # the scan's logger: the walk is its first half


@dataclass
class WalkResult:
    """Files found by a walk: ``{key: (path, stat)}`` plus the directories that could not be read."""

    files: dict[str, tuple[str, os.stat_result]]
    unlisted_dirs: list[str]


def walk_tree(root: str, matcher: PathMatcher, *, follow_symlinks: bool = False, start: str | None = None,
              on_file: Callable[[int], None] | None = None) -> WalkResult:
    """Walk the tree at ``root`` (real, absolute), or its subtree ``start``; nothing is read.

    ``matcher`` selects files and prunes directories by name and path relative to ``root``.
    ``on_file(n)`` is called after each directory with the number of files it added (progress).
    Unreadable directories are logged and listed in ``unlisted_dirs`` (their documents must not
    be deleted).  Files that vanish between listing and stat are left out.  Never raises for a
    file system error.
    """
    files: dict[str, tuple[str, os.stat_result]] = {}
    unlisted: list[str] = []
    follow = follow_symlinks
    top = start or root
    visited: set[tuple[int, int]] = set()
    # (directory, path relative to root, reached through a symlink?): a start reached
    # through a link (``ln -s . again``) keys its files by their real paths, as every
    # other file reached through a link
    through_link = follow and os.path.realpath(top) != top
    rel_top = "" if top == root else os.path.relpath(top, root).replace(os.sep, "/")
    stack: list[tuple[str, str, bool]] = [(top, rel_top, through_link)]
    try:
        st_top = os.stat(top)
        visited.add((st_top.st_dev, st_top.st_ino))
    except OSError:
        pass
    # hot loop: bind what it calls; build the relative path only when a pattern needs it
    needs_rel = matcher.needs_rel
    exc_name = matcher.exc_file_name_match
    inc_all = matcher.include_all
    safe = URI_SAFE.fullmatch
    while stack:
        dirpath, rel, via_link = stack.pop()
        try:
            it = os.scandir(dirpath)
        except OSError as e:
            log.warning("cannot list directory %s: %s", display_path(dirpath), e.strerror)
            unlisted.append(dirpath)
            continue
        subdirs = []
        n_before = len(files)
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
                        subdirs.append((entry.path, erel, via_link or is_link))
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
                path = os.path.realpath(entry.path) if is_link or via_link else entry.path
                key = "file://" + path if safe(path) else path_to_key(path)
                if key not in files:
                    files[key] = (path, st)
        if on_file is not None and len(files) > n_before:
            on_file(len(files) - n_before)
        stack.extend(reversed(subdirs))
    return WalkResult(files, unlisted)
