"""Local trees: the stat scan (reconcile) and single-path handling used by the watcher.

Change test (:meth:`FileSource.unchanged`): a file whose ``(st_mtime_ns, st_size, st_ctime_ns,
st_ino)`` equals the stored one costs one ``stat`` (from ``os.scandir``) and no read.  Everything else is read (at most ``max_size`` bytes) and
handed to the pipeline, which decides.  Files gone since the last scan are deleted from the index
-- but never below a directory that could not be listed this time, and never when the root
itself is missing (an unmounted disk must not empty the index).

Keys: :mod:`indexerd.sources.files.keys`; include/exclude globs: :mod:`indexerd.sources.files.globs`.

Symlinks are not followed by default.  With ``follow_symlinks = true`` each directory is entered
once per (st_dev, st_ino), so a loop ends at once, and a file reached through a link is keyed by
its real path (indexed once however many links lead to it).
"""

from __future__ import annotations

import logging
import os
import stat as stat_mod
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from indexerd.extract.sniff import SNIFF_BYTES
from indexerd.sources.files import confined, mailboxes
from indexerd.sources.files.globs import PathMatcher
from indexerd.sources.files.keys import (URI_SAFE, display_path, path_to_key, stat_of, too_large_stands,
                                         trusted_ctime_ns)
from indexerd.config import FilesystemSource, SourcePolicy
from indexerd.core.dates import MetaMap
from indexerd.core.decide import DecideSettings
from indexerd.core.errors import IndexUnavailable, StoreError
from indexerd.core.pipeline import Fetched, PassCounts, Pipeline, Policy

log = logging.getLogger(__name__)
UTC = timezone.utc


@dataclass
class WalkResult:
    """Files found by a walk: ``{key: (path, stat)}`` plus the directories that could not be read."""

    files: dict[str, tuple[str, os.stat_result]]
    unlisted_dirs: list[str]


class FileSource:
    """One configured tree.

    Args:
        cfg: the ``[[sources.filesystem]]`` table.
        policy: the effective per-source settings.
        meta_map: the loaded meta map (for local HTML).
    """

    kind = "filesystem"

    def __init__(self, cfg: FilesystemSource, policy: SourcePolicy, meta_map: MetaMap) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.root = os.path.realpath(os.path.expanduser(cfg.path))
        self.policy = policy
        self.matcher = PathMatcher(cfg.include, cfg.exclude)
        self.pipeline_policy = Policy(
            meta_map=meta_map, date_order=policy.date_sources, max_bytes=policy.max_size_bytes,
            settings=DecideSettings(refresh_time_seconds=policy.refresh_time_seconds,
                                    strict_dates=policy.strict_dates))

    # -- walking --------------------------------------------------------------------------
    def contains(self, path: str) -> bool:
        """Is ``path`` (absolute, real) inside this source's root?"""
        return path == self.root or path.startswith(self.root.rstrip("/") + "/")

    def relpath(self, path: str) -> str:
        return os.path.relpath(path, self.root).replace(os.sep, "/")

    def walk(self, start: str | None = None, on_file=None) -> WalkResult:
        """Walk the tree (or the subtree ``start``) with ``os.scandir``; nothing is read.

        ``on_file(n)`` is called after each directory with the number of files it added (progress).  Unreadable directories are logged
        and listed in ``unlisted_dirs`` (their documents must not be deleted).
        """
        files: dict[str, tuple[str, os.stat_result]] = {}
        unlisted: list[str] = []
        follow = self.cfg.follow_symlinks
        root = self.root
        top = start or root
        visited: set[tuple[int, int]] = set()
        # (directory, path relative to root, reached through a symlink?): a start reached
        # through a link (``ln -s . again``) keys its files by their real paths, as every
        # other file reached through a link
        through_link = follow and os.path.realpath(top) != top
        stack: list[tuple[str, str, bool]] = [(top, "" if top == root else self.relpath(top), through_link)]
        try:
            st_top = os.stat(top)
            visited.add((st_top.st_dev, st_top.st_ino))
        except OSError:
            pass
        matcher = self.matcher
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

    # -- one path -------------------------------------------------------------------------
    def read(self, path: str, st: os.stat_result, pipeline: Pipeline, counts: PassCounts, *,
             forced: bool = False) -> str:
        """Read one file (stat already taken) and hand it to the pipeline; returns the verdict."""
        key = path_to_key(path)
        max_size = self.policy.max_size_bytes
        name = os.path.basename(path)
        title = display_path(name)
        stat_facts = dict(mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns, ino=st.st_ino)
        if not stat_mod.S_ISREG(st.st_mode):
            return pipeline.skip(key, self.name, "not-a-file", f"{display_path(path)} is not a regular file",
                                 counts, size=st.st_size, title=title, **stat_facts).verdict
        if st.st_size > max_size and not mailboxes.may_be_mailbox(name):
            return pipeline.skip(key, self.name, "too-large",
                                 f"{display_path(path)}: {st.st_size} bytes > max_size {max_size}",
                                 counts, size=st.st_size, title=title, **stat_facts).verdict
        read_at_ns = time.time_ns()
        try:
            fd = self._open(path)
            with os.fdopen(fd, "rb") as fh:
                st2 = os.fstat(fh.fileno())
                stat_facts = dict(mtime_ns=st2.st_mtime_ns, ino=st2.st_ino,
                                  ctime_ns=trusted_ctime_ns(st2.st_ctime_ns, read_at_ns))
                if not stat_mod.S_ISREG(st2.st_mode):
                    return pipeline.skip(key, self.name, "not-a-file", display_path(path), counts,
                                         size=st2.st_size, title=title, **stat_facts).verdict
                data = fh.read(min(max_size + 1, SNIFF_BYTES))
                if mailboxes.may_be_mailbox(name) and mailboxes.is_mailbox(name, data):
                    fh.seek(0)
                    return mailboxes.index_mailbox(
                        self, key, path, fh, st2.st_size, stat_facts,
                        datetime.fromtimestamp(st2.st_mtime_ns / 1e9, UTC), pipeline, counts,
                        forced=forced)
                if st2.st_size > max_size:
                    return pipeline.skip(key, self.name, "too-large",
                                         f"{display_path(path)}: {st2.st_size} bytes > max_size "
                                         f"{max_size}", counts, size=st2.st_size, title=title,
                                         **stat_facts).verdict
                if len(data) <= max_size:
                    data += fh.read(max_size + 1 - len(data))
        except (FileNotFoundError, confined.NotARealDirectory):  # gone, or a directory on the
            # way was swapped for a symlink or a file: what is there now is not this key's file
            stored = pipeline.stored(key)
            if stored is not None:
                return pipeline.gone(key, counts, "vanished").verdict
            return "vanished"
        except OSError as e:
            return pipeline.skip(key, self.name, "unreadable", f"{display_path(path)}: {e.strerror}", counts,
                                 size=st.st_size, status="error", title=title, **stat_facts).verdict
        if len(data) > max_size:
            return pipeline.skip(key, self.name, "too-large",
                                 f"{display_path(path)}: grew past max_size {max_size} while read",
                                 counts, size=len(data), title=title, **stat_facts).verdict
        mtime = datetime.fromtimestamp(st2.st_mtime_ns / 1e9, UTC)
        f = Fetched(key=key, source=self.name, url=key, data=data, fetched_at=pipeline.clock(), path=path,
                    name=name, protocol_date=mtime, protocol_kind="mtime", size=len(data), **stat_facts)
        return pipeline.handle(f, self.pipeline_policy, counts, forced=forced, fallback_title=title).verdict

    def _open(self, path: str) -> int:
        """A read-only descriptor of the file at ``path`` (below the root).  Unless the source
        follows symlinks, every component is opened without following one
        (:func:`indexerd.sources.files.confined.open_file`), so a directory swapped for a symlink between
        the listing (or the event) and the read cannot lead outside the tree.

        Raises:
            FileNotFoundError, confined.NotARealDirectory, OSError.
        """
        if self.cfg.follow_symlinks:
            return os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        return confined.open_file(self.root, confined.names_below(self.root, path))

    def stat_path(self, path: str) -> os.stat_result | None:
        """The stat of ``path`` as this source sees it (None: missing or not reachable without
        following a symlinked directory when the source does not follow symlinks)."""
        if self.cfg.follow_symlinks:
            try:
                return os.stat(path)
            except OSError:
                return None
        try:
            return confined.lstat(self.root, confined.names_below(self.root, path))
        except confined.NotARealDirectory:
            return None

    def confine(self, path: str) -> str:
        """The path a control request may name: ``path`` itself, checked to be inside the
        root.  A source that does not follow symlinks refuses a symlink anywhere below the root
        (directories and the file itself); one that does takes the real path, which must still
        be inside the root.

        Raises:
            ValueError: naming the path and why (not absolute, ``..`` or ``.`` components,
                outside the root, through a symlink).
        """
        if not os.path.isabs(path):
            raise ValueError(f"{display_path(path)}: not an absolute path")
        if self.cfg.follow_symlinks:
            real = os.path.realpath(path)
            if not self.contains(real):
                raise ValueError(f"{display_path(path)}: resolves to {display_path(real)}, outside "
                                 f"source {self.name} ({display_path(self.root)})")
            return real
        names = confined.names_below(self.root, path)
        try:
            with confined.open_dir(self.root, names[:-1]) as dfd:
                if dfd is not None and names and stat_mod.S_ISLNK(
                        os.stat(names[-1], dir_fd=dfd, follow_symlinks=False).st_mode):
                    raise confined.NotARealDirectory(f"{names[-1]!r} is a symlink")
        except FileNotFoundError:
            pass  # a vanished file: its document is deleted
        except confined.NotARealDirectory as e:
            raise ValueError(f"{display_path(path)}: {e} (source {self.name} does not follow "
                             f"symlinks)") from None
        return path

    def handle_path(self, path: str, pipeline: Pipeline, counts: PassCounts, *, forced: bool = False) -> str:
        """React to one path (a watcher event or a command-line file): index, skip or delete it.

        Always ``stat`` first: a path may be gone by now (editors' temp files, moved dirs).
        """
        if self.cfg.follow_symlinks:
            path = os.path.realpath(path)  # keyed by its real path, as the walk keys it
        key = path_to_key(path)
        rel = self.relpath(path)
        st = self.stat_path(path)
        if st is None or not self.matcher.path_selected(rel) or \
                (stat_mod.S_ISLNK(st.st_mode) and not self.cfg.follow_symlinks):
            if pipeline.stored(key) is not None:
                messages = sorted(mailboxes.children(pipeline, self.name, key))
                if messages:
                    pipeline.gone_many(messages, counts, "its mailbox vanished or is excluded")
                return pipeline.gone(key, counts, "vanished or excluded").verdict
            return "ignored"
        if stat_mod.S_ISDIR(st.st_mode):
            self.scan(pipeline, counts, start=path)
            return "scanned"
        stored = pipeline.stored(key)
        if not forced and stored is not None:
            sv = stat_of(stored)
            if self.unchanged(sv, st) or self.same_limit_skip(stored, st):
                if sv[2] is None:
                    pipeline.writer.submit_stat_baseline([(st.st_ctime_ns, st.st_ino, key, st.st_mtime_ns,
                                                           st.st_size)])
                return pipeline.unchanged(counts).verdict
        return self.read(path, st, pipeline, counts, forced=forced)

    def unchanged(self, stored: tuple, st: os.stat_result) -> bool:
        """The change test: may this file's last verdict stand without reading it?

        ``stored`` is ``(mtime_ns, size, ctime_ns, ino, reason)`` from :meth:`Store.stat_map`.
        Unchanged when mtime (ns), size, ctime (ns) and inode number all equal the stored ones,
        except a ``too-large`` skip that now fits under a raised ``max_size``.  The ctime is
        what catches a rewrite that keeps size and mtime (``cp -p``, ``rsync -t``,
        ``SOURCE_DATE_EPOCH`` builds, a restored backup, a same-size write within one mtime
        tick): the kernel sets it on every change and nothing can set it back; the inode
        catches a file replaced by another (rename over it).  The device number is not used:
        it is not stable across reboots for many file systems, and would make every file be
        read again.  A row without ctime (written before schema 5) is judged on mtime and size
        alone, once: the scan then records its ctime and inode as they are (a baseline, no
        read).  A stored ctime of 0 means the stat was taken within :data:`RACY_WINDOW_NS` of a
        change (see :func:`trusted_ctime_ns`): the file is read again.  A ctime that moved
        without a content change (chmod, touch) costs one read; the content hash then keeps the
        document as it is.
        """
        mtime_ns, size, ctime_ns, ino, reason = stored
        if mtime_ns != st.st_mtime_ns or size != st.st_size:
            return False
        if ctime_ns is not None and ctime_ns != st.st_ctime_ns:
            return False
        if ino is not None and ino != st.st_ino:
            return False
        if reason == "too-large" and st.st_size <= self.policy.max_size_bytes:
            return False
        return True

    def same_limit_skip(self, rec, st: os.stat_result) -> bool:
        """May the stored ``too-large`` skip ``rec`` of a file that fits ``max_size`` stand
        without a read (:func:`~indexerd.sources.files.keys.too_large_stands`)?"""
        return too_large_stands(rec, st, self.policy.max_size_bytes)

    def run_pass(self, pipeline: Pipeline, counts: PassCounts, **kw) -> None:
        """The source interface every kind shares: for a tree, one stat reconcile (:meth:`scan`)."""
        self.scan(pipeline, counts, **kw)

    # -- the reconcile pass ---------------------------------------------------------------
    #: why the last :meth:`scan` could not read its top directory (None: it could); also set as
    #: the pass's ``counts.failed``, on which the CLI exits 1
    root_failed: str | None = None

    def _root_failed(self, top: str, why: str, counts: PassCounts, pipeline: Pipeline) -> None:
        """The pass's top directory is missing or unreadable: one error, nothing deleted (an
        unmounted disk or a permission change must not empty the index).  Counted as
        ``error.root-missing`` / ``error.root-unreadable``; the message is the pass's error."""
        self.root_failed = counts.failed = f"root {display_path(top)} {why}"
        log.error("source %s: %s; nothing is deleted", self.name, self.root_failed)
        counts.fail(f"{self.root_failed}; nothing is deleted")
        pipeline.counters.inc("error.root-missing" if "missing" in why else "error.root-unreadable")

    def scan(self, pipeline: Pipeline, counts: PassCounts, *, start: str | None = None,
             progress=None, forced: bool = False, cancel=None) -> None:
        """Reconcile the tree (or the subtree ``start``) with the store: index what changed,
        delete what is gone.  ``progress`` is a :class:`~indexerd.core.progress.Progress` or None;
        ``cancel`` a :class:`threading.Event`: when set, the pass stops early and deletes
        nothing (what it did not see is not gone)."""
        top = start or self.root
        self.root_failed = None
        if not os.path.isdir(top):
            self._root_failed(top, "is missing or not a directory", counts, pipeline)
            return
        stored = pipeline.store.stat_map(self.name)
        found = self.walk(top, on_file=progress.tick_walk if progress else None)
        if top in found.unlisted_dirs:  # an unreadable root is not an empty tree
            self._root_failed(top, "cannot be listed", counts, pipeline)
            return
        todo: list[tuple[str, os.stat_result]] = []
        baseline: list[tuple[int, int, str, int, int]] = []  # old rows: record ctime and inode
        unchanged = self.unchanged
        for key, (path, st) in found.files.items():
            if not forced:
                sv = stored.get(key)
                if sv is not None and (
                        # the common case of unchanged() inline: the same stat, not a too-large skip
                        (sv[0] == st.st_mtime_ns and sv[1] == st.st_size and sv[2] == st.st_ctime_ns
                         and sv[3] == st.st_ino and sv[4] != "too-large") or unchanged(sv, st)):
                    pipeline.unchanged(counts)
                    if sv[2] is None:
                        baseline.append((st.st_ctime_ns, st.st_ino, key, st.st_mtime_ns, st.st_size))
                    continue
                # the store may lag: a queued write (the watcher's) may already cover this stat
                rec = pipeline.stored(key)
                if rec is not None and (unchanged(stat_of(rec), st) or self.same_limit_skip(rec, st)):
                    pipeline.unchanged(counts)
                    continue
            todo.append((path, st))
        if baseline:
            pipeline.writer.submit_stat_baseline(baseline)
        if progress:
            progress.start_work(len(todo))
        for path, st in todo:
            if cancel is not None and cancel.is_set():
                log.info("source %s: pass cancelled; nothing deleted", self.name)
                return
            try:
                self.read(path, st, pipeline, counts, forced=forced)
            except (IndexUnavailable, StoreError):
                raise  # the whole pass cannot go on; the CLI reports it
            except Exception as e:  # a bug on one file must not end the pass
                log.exception("failed on %s", display_path(path))
                counts.fail(f"{display_path(path)}: internal error: {type(e).__name__}: {e}")
                pipeline.counters.inc("error.internal")
            if progress:
                progress.tick_work(path)
        if cancel is not None and cancel.is_set():
            return
        prefix = path_to_key(top).rstrip("/") + "/"
        protected = [path_to_key(d).rstrip("/") + "/" for d in found.unlisted_dirs]
        gone = []
        for key in stored.keys() - found.files.keys():
            if start is not None and not key.startswith(prefix):
                continue
            if "#" in key and key.partition("#")[0] in found.files:
                continue  # a message of a mailbox still there (mailboxes.py keeps those)
            if any(key.startswith(p) for p in protected):
                continue
            if pipeline.removal_queued(key):
                continue  # its removal is already queued
            gone.append(key)
        pipeline.gone_many(sorted(gone), counts, "no longer in the tree")
