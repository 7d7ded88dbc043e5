"""Local trees: the stat scan (reconcile) and single-path handling used by the watcher.

Change test (:func:`indexerd.sources.files.change.unchanged`): a file whose ``(st_mtime_ns, st_size, st_ctime_ns,
st_ino)`` equals the stored one costs one ``stat`` (from ``os.scandir``) and no read.  Everything else is read (at most ``max_size`` bytes) and
handed to the pipeline, which decides.  Files gone since the last scan are deleted from the index
-- but never below a directory that could not be listed this time, and never when the root
itself is missing (an unmounted disk must not empty the index).

Keys: :mod:`indexerd.core.filekeys`, stat facts: :mod:`indexerd.sources.files.keys`; include/exclude globs: :mod:`indexerd.sources.files.globs`.

Symlinks are not followed by default.  With ``follow_symlinks = true`` each directory is entered
once per (st_dev, st_ino), so a loop ends at once, and a file reached through a link is keyed by
its real path (indexed once however many links lead to it).
"""

from __future__ import annotations

import logging
import os
import stat as stat_mod
from datetime import timezone
from itertools import islice
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Iterator

from indexerd.sources.files import confined, live, mailboxes
from indexerd.sources.files.change import unchanged
from indexerd.sources.files.globs import PathMatcher
from indexerd.sources.files.readfile import read_file
from indexerd.sources.files.readqueue import ReadQueue
from indexerd.sources.files.walk import Unlisted, WalkedFile, walk_runs
from indexerd.sources.files.walkprocess import WalkedElsewhere, walk_runs_elsewhere, walks_elsewhere
from indexerd.core.filekeys import key_to_path, path_to_key
from indexerd.sources.files.keys import display_path, stat_of, too_large_stands
from indexerd.config import SourcePolicy
from indexerd.sources.files.table import FilesystemSource
from indexerd.core.metamap import MetaMap
from indexerd.core.decide import DecideSettings
from indexerd.core.errors import EnvironmentFailure, IndexUnavailable, StoreError
from indexerd.pipeline.fetched import Policy
from indexerd.pipeline.stages import PassCounts, Pipeline

if TYPE_CHECKING:
    from indexerd.core.store.protocols import StateStore

log = logging.getLogger(__name__)
UTC = timezone.utc
#: a stored verdict with these reasons may not stand on its stat alone (:func:`unchanged`)
READ_AGAIN_OR_CAPPED = frozenset({"environment", "too-large"})
_KEY = itemgetter(0)  # of a stored row and of a WalkedFile
_ST = itemgetter(2)  # a WalkedFile's stat
_STORED_STAT = itemgetter(1, 2, 3, 4)  # a stored row's (mtime_ns, size, ctime_ns, ino)
_STAT = attrgetter("st_mtime_ns", "st_size", "st_ctime_ns", "st_ino")
_REASON = itemgetter(5)


def _pass_failed(source: str, why: str, counted: str, counts: PassCounts, pipeline: Pipeline,
                 logged: str = "") -> None:
    """A pass that cannot go on, before anything is deleted: ``why`` is its failure and its one
    error (``logged`` added to both in the log and the error), counted as ``counted``."""
    log.error("source %s: %s%s", source, why, logged)
    counts.failed = why
    counts.fail(why + logged)
    pipeline.counters.inc(counted)


def _first_key(run: list[WalkedFile] | WalkedElsewhere) -> str:
    return run.keys[0] if isinstance(run, WalkedElsewhere) else run[0][0]


def _keys_and_stats(run: list[WalkedFile] | WalkedElsewhere) -> tuple[list[str], list[tuple]]:
    """A run's keys and ``(st_mtime_ns, st_size, st_ctime_ns, st_ino)``, as the stored rows'."""
    if isinstance(run, WalkedElsewhere):
        return run.keys, run.stats
    return list(map(_KEY, run)), list(map(_STAT, map(_ST, run)))


class FileSource:
    """One configured tree.

    Args:
        cfg: the ``[[sources.filesystem]]`` table.
        policy: the effective per-source settings.
        meta_map: the loaded meta map (for local HTML).
    """

    kind = "filesystem"
    key_prefixes = ("file://",)
    unknown_reason = "no such file, or its source's include/exclude rules leave it out"

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

    def walk_runs(self, start: str | None = None, on_file=None) -> Iterator[list[WalkedFile] | Unlisted]:
        """The tree's (or subtree ``start``'s) files in key order, a run at a time: :func:`.walk.walk_runs`."""
        return walk_runs(self.root, self.matcher, follow_symlinks=self.cfg.follow_symlinks, start=start,
                         on_file=on_file)

    # -- one path -------------------------------------------------------------------------
    def read(self, path: str, st: os.stat_result, pipeline: Pipeline, counts: PassCounts, *,
             forced: bool = False) -> str:
        """Read one file (stat already taken) and hand it to the pipeline; returns the verdict
        (:func:`indexerd.sources.files.readfile.read_file`)."""
        return read_file(self, path, st, pipeline, counts, forced=forced)

    def stat_path(self, path: str) -> os.stat_result | None:
        """The stat of ``path`` as this source sees it (:func:`confined.stat_below`)."""
        return confined.stat_below(self.root, path, follow_symlinks=self.cfg.follow_symlinks)

    def confine(self, path: str) -> str:
        """The path a control request may name (:func:`indexerd.sources.files.confined.confine`).

        Raises:
            ValueError: naming the path and why.
        """
        return confined.confine(self.root, path, follow_symlinks=self.cfg.follow_symlinks, source=self.name)

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
        """The change test (:func:`indexerd.sources.files.change.unchanged`) with this source's
        ``max_size``."""
        return unchanged(stored, st, self.policy.max_size_bytes)

    def same_limit_skip(self, rec, st: os.stat_result) -> bool:
        """May the stored ``too-large`` skip ``rec`` of a file that fits ``max_size`` stand
        without a read (:func:`~indexerd.sources.files.keys.too_large_stands`)?"""
        return too_large_stands(rec, st, self.policy.max_size_bytes)

    # -- the Source protocol (indexerd.sources.base) -------------------------------------
    def run_pass(self, pipeline: Pipeline, counts: PassCounts, *, recheck: bool = False, **kw) -> None:
        """For a tree, one stat reconcile (:meth:`scan`), which stats every file anyway
        (``recheck`` changes nothing)."""
        self.scan(pipeline, counts, **kw)

    @property
    def watches(self) -> bool:
        """Live changes wanted (``watch = true``)."""
        return bool(self.cfg.watch)

    def check(self, where: str, *, files: bool) -> None:
        """Nothing to check before a pass: a missing root fails the pass, nothing is deleted."""

    def owns(self, key: str) -> bool:
        return key.startswith(self.key_prefixes) and self.contains(key_to_path(key))

    def accepts(self, path: str, is_dir: bool) -> bool:
        return live.accepts(self, path, is_dir)

    def apply_change(self, pipeline: Pipeline, path: str, was_dir: bool, counts: PassCounts, *,
                     cancel=None) -> None:
        live.apply_change(self, pipeline, path, was_dir, counts, cancel=cancel)

    def reindex(self, items: list[str], pipeline: Pipeline, counts: PassCounts, *, cancel=None) -> list[str]:
        """``ctl reindex PATH``: ``items`` are confined paths (:meth:`confine`); returns those
        neither there (nor selected by the include/exclude rules) nor stored."""
        return [p for p in items if self.handle_path(p, pipeline, counts, forced=True) == "ignored"]

    def on_forgotten(self, store: StateStore, key: str) -> None:
        """Nothing to remember: the next scan finds a forgotten file that is still there."""

    def status_facts(self) -> dict:
        return {"root": display_path(self.root)}

    def close(self) -> None:
        """Nothing is held open between passes."""

    # -- the reconcile pass ---------------------------------------------------------------
    #: why the last :meth:`scan` could not read its top directory (None: it could); also set as
    #: the pass's ``counts.failed``, on which the CLI exits 1
    root_failed: str | None = None

    def _root_failed(self, top: str, why: str, counts: PassCounts, pipeline: Pipeline) -> None:
        """The pass's top directory is missing or unreadable: one error, nothing deleted (an
        unmounted disk or a permission change must not empty the index).  Counted as
        ``error.root-missing`` / ``error.root-unreadable``; the message is the pass's error."""
        self.root_failed = f"root {display_path(top)} {why}"
        _pass_failed(self.name, self.root_failed, "error.root-missing" if "missing" in why else "error.root-unreadable",
                     counts, pipeline, "; nothing is deleted")

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
        prefix = path_to_key(top).rstrip("/") + "/"
        # the stored rows in key order, a chunk at a time, merged with the walk (also in key
        # order): neither the tree nor the store is held in memory, only what changed
        rows = pipeline.store.stat_rows(self.name, prefix if start is not None else None)
        ahead: list = []  # rows a run's test took and gave back, the next one last

        def next_row():
            return ahead.pop() if ahead else next(rows, None)

        row = next_row()
        todo = ReadQueue()  # every file to read: a chunk in memory, the rest in a temp file
        baseline: list[tuple[int, int, str, int, int]] = []  # old rows: record ctime and inode
        unchanged = self.unchanged
        protected: list[str] = []  # key prefixes of directories that could not be listed
        missing: list[str] = []  # stored, not walked: gone unless protected or reached by a link
        linked: dict[str, tuple[str, os.stat_result]] = {}  # reached through a symlink: any key
        walked: set[str] | None = set() if self.cfg.follow_symlinks else None  # links may repeat a file
        last_file = ""  # the last file walked in order: its mailbox's messages follow it
        same = 0  # files found unchanged by the walk's inline test, not counted yet

        def check(key: str, path: str, st: os.stat_result, sv) -> None:
            if not forced:
                if sv is not None and unchanged(sv, st):
                    pipeline.unchanged(counts)
                    if sv[2] is None:
                        baseline.append((st.st_ctime_ns, st.st_ino, key, st.st_mtime_ns, st.st_size))
                    return
                # the store may lag: a queued write (the watcher's) may already cover this stat
                rec = pipeline.stored(key)
                if rec is not None and (unchanged(stat_of(rec), st) or self.same_limit_skip(rec, st)):
                    pipeline.unchanged(counts)
                    return
            todo.append((path, st))

        def not_walked(key: str) -> None:
            if "#" in key and key.partition("#")[0] == last_file:
                return  # a message of a mailbox still there (mailboxes.py keeps those)
            if any(key.startswith(p) for p in protected):
                return
            missing.append(key)

        tick = progress.tick_walk if progress else None
        runs: Iterator[list[WalkedFile] | WalkedElsewhere | Unlisted] = (
            walk_runs_elsewhere(self.root, list(self.cfg.include), list(self.cfg.exclude), start=top, on_file=tick)
            if walks_elsewhere(pipeline.store, self.name, start, self.cfg.follow_symlinks)
            else self.walk_runs(top, on_file=tick))
        try:
            for run in runs:
                if isinstance(run, Unlisted):
                    if run.path == top:  # an unreadable root is not an empty tree
                        self._root_failed(top, "cannot be listed", counts, pipeline)
                        return
                    protected.append(run.prefix)
                    continue
                if not forced and walked is None and row is not None and row[0] == _first_key(run):
                    # a run whose files are the next stored rows with the same stats, none a verdict
                    # that never stands (the test is all C: a million files' pass was 2.3x the bare
                    # walk with a Python merge step per file)
                    keys, stats = _keys_and_stats(run)
                    taken = [row]
                    while ahead and len(taken) < len(keys):
                        taken.append(ahead.pop())
                    taken += islice(rows, len(keys) - len(taken))
                    if list(map(_KEY, taken)) == keys and list(map(_STORED_STAT, taken)) == stats and \
                            READ_AGAIN_OR_CAPPED.isdisjoint(map(_REASON, taken)):
                        same += len(keys)
                        last_file = keys[-1]
                        row = next_row()
                        if same >= 1000:
                            pipeline.unchanged(counts, n=same)
                            same = 0
                        continue
                    ahead.extend(reversed(taken[1:]))  # not all the same: file by file below
                # a run walked elsewhere is stat'ed here: what is read is decided on this pass's stat
                for key, path, st, in_order in (run.files() if isinstance(run, WalkedElsewhere) else run):
                    if not in_order:
                        linked.setdefault(key, (path, st))
                        continue
                    while row is not None and row[0] < key:
                        not_walked(row[0])
                        row = next_row()
                    last_file = key
                    if walked is not None:
                        walked.add(key)
                    if row is None or row[0] != key:
                        check(key, path, st, None)
                        continue
                    here, row = row, next_row()
                    # the common case of the change test inline: the same stat, not a too-large skip
                    if not forced and here[1] == st.st_mtime_ns and here[2] == st.st_size and \
                            here[3] == st.st_ctime_ns and here[4] == st.st_ino and here[5] != "too-large" and \
                            here[5] != "environment":
                        same += 1
                        continue
                    check(key, path, st, here[1:])
                if same >= 1000:  # counted as it goes: a running pass's status shows them
                    pipeline.unchanged(counts, n=same)
                    same = 0
        except EnvironmentFailure as e:  # the walking process died: what it did not report is not gone
            return _pass_failed(self.name, str(e), "error.walk", counts, pipeline)
        finally:
            runs.close()  # type: ignore[attr-defined]  # a generator: a walking process ends with it
        if same:
            pipeline.unchanged(counts, n=same)
        while row is not None:
            not_walked(row[0])
            row = next_row()
        for key, (path, st) in linked.items():  # reached through a link: its row looked up alone
            if walked is not None and key in walked:
                continue
            rec = pipeline.store.get(key)
            check(key, path, st, stat_of(rec) if rec is not None else None)
        if baseline:
            pipeline.writer.submit_stat_baseline(baseline)
        if progress:
            progress.start_work(len(todo))
        try:
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
        finally:
            todo.close()
        if cancel is not None and cancel.is_set():
            return
        gone = [key for key in missing
                if not (key in linked or ("#" in key and key.partition("#")[0] in linked))]
        # a live change may have removed some since the walk read the store
        pipeline.gone_many(pipeline.still_stored(gone), counts, "no longer in the tree")
