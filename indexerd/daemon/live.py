"""The daemon's live path: the watcher of every tree source that wants live changes, and the
change workers that apply the queued paths, several at once.

The watcher (:class:`~indexerd.sources.files.watch.TreeWatcher`) queues paths in a
:class:`~indexerd.sources.files.watch.ChangeQueue`; a feeder thread moves the due ones to a
:class:`~indexerd.daemon.changeboard.ChangeBoard`, from which :data:`CHANGE_WORKERS` threads,
each with a :class:`Pipeline` of its own, take one at a time and hand it to its source's
:meth:`~indexerd.sources.base.TreeSource.apply_change`.  So one slow document (a parse that
takes its whole extraction bound, 60 s by default) delays no other edit; the board never gives
out two changes of one path, or of a directory and a path below it, at once, and gives those
out in the order they came due.  A watch that died,
or a queue that overflowed, is made good by a pass of the source.  Live edits are timed from
their first event to the commit that makes them searchable (the edit-to-searchable metric).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from indexerd.core.errors import IndexerdError, IndexUnavailable, RetryLater, StoreError
from indexerd.pipeline.stages import PassCounts, Pipeline
from indexerd.daemon import notify
from indexerd.daemon.changeboard import ChangeBoard
from indexerd.sources.base import TreeSource, as_tree, trees
from indexerd.sources.files.keys import display_path
from indexerd.sources.files.watch import Change, ChangeQueue, TreeWatcher

if TYPE_CHECKING:
    from indexerd.daemon.main import Daemon
    from indexerd.daemon.sourcestate import SourceState

log = logging.getLogger(__name__)

#: threads applying live changes at once: a slow document holds one of them, and the extraction
#: workers (2 by default) are shared with the passes
CHANGE_WORKERS = 4


class LivePath:
    """The watcher and the change workers of one daemon.

    Args:
        daemon: whose sources, states, lock, stop event, jobs and metrics it uses.

    Lifecycle: :meth:`start` (feeder and workers, then watcher), :meth:`watch_all` after every change of the
    sources, :meth:`check` from the main loop, :meth:`stop` then :meth:`join`.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon
        self.changes = ChangeQueue()
        self.board = ChangeBoard()
        self.watcher: TreeWatcher | None = None
        #: the feeder, then the change workers
        self.threads: list[threading.Thread] = []
        #: live edits submitted to the writer and not yet committed: (submitted, first event),
        #: monotonic seconds, for the edit-to-searchable metric
        self._edits: list[tuple[float, float]] = []

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.threads = [threading.Thread(target=self._feed_loop, name="change-feeder", daemon=True)]
        self.threads += [threading.Thread(target=self._change_loop, name=f"change-worker-{n}", daemon=True)
                         for n in range(1, CHANGE_WORKERS + 1)]
        for thread in self.threads:
            thread.start()
        self.watcher = TreeWatcher(self.changes, self._accepts, self._on_overflow, self._on_watch_limit)
        self.watcher.start()

    def stop(self) -> None:
        """Stop the watcher and wake the feeder and the workers (each ends at its next look at
        the stop event; one applying a change ends when that change is done)."""
        if self.watcher is not None:
            self.watcher.stop()
        self.changes.wake()
        self.board.wake()

    def join(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds in all for the feeder and the workers; True when
        all have ended (or never ran)."""
        by = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(timeout=max(0.0, by - time.monotonic()))
        return not any(thread.is_alive() for thread in self.threads)

    def alive(self) -> bool:
        """The feeder and every worker run (or were not started yet)."""
        return all(thread.is_alive() for thread in self.threads)

    def queued(self) -> int:
        """Live changes waiting: in the change queue (not due yet, or due) and on the board
        (due, not yet taken by a worker)."""
        return len(self.changes) + self.board.waiting()

    def applying(self) -> int:
        """Live changes a change worker is applying now."""
        return self.board.applying()

    # -- watches --------------------------------------------------------------------------
    def watch_all(self) -> None:
        """Watch every tree source that wants live changes (after a start or a reload) and
        record in its state whether it is watched, or why not."""
        d = self.d
        watcher = self.watcher
        assert watcher is not None, "watch_all after start()"
        watcher.unwatch_all()
        for name, src in d.sources.items():
            st = d.states[name]
            tree = as_tree(src)
            st.watched = (tree is not None and tree.watches and os.path.isdir(tree.root)
                          and watcher.watch(name, tree.root))
            st.watch_error = watcher.errors.get(name) if tree is not None else None
            if st.watch_error:
                log.warning("%s: not watched (%s): kept current by scheduled reconciles every %s s",
                            name, st.watch_error, src.cfg.interval)

    def check(self) -> None:
        """A watch whose thread died (an exception in watchdog: a tree too deep for its walk
        moved in) is reported and set up again; while that fails, the tree is kept current by
        its scheduled reconciles (each retries the watch).  Either way a reconcile runs now: the
        events since the death were lost."""
        d = self.d
        if self.watcher is None:
            return
        for name, why in self.watcher.check().items():
            st, src = d.states.get(name), d.sources.get(name)
            src = as_tree(src)
            if st is None or src is None:
                continue
            d.indexer.counters.inc("watch.died")
            log.error("%s: the watcher of %s stopped (%s); setting it up again", name,
                      display_path(src.root), why)
            ok = os.path.isdir(src.root) and self.watcher.watch(name, src.root)
            with d.lock:
                st.watched = ok
                st.watch_error = None if ok else self.watcher.errors.get(name, why)
            if not ok:
                log.warning("%s: not watched (%s): kept current by scheduled reconciles every %s s",
                            name, st.watch_error, src.cfg.interval)
            notify.status(d.status_line())
            d.jobs.run_soon({name})

    def rewatch_after_pass(self, name: str, src, st: SourceState) -> None:
        """After a pass of a tree whose watch failed: try to watch it again (the deep tree may
        be gone)."""
        d = self.d
        src = as_tree(src)
        if self.watcher is None or src is None or not src.watches or not st.watch_error \
                or d.stop_event.is_set() or not os.path.isdir(src.root):
            return
        if self.watcher.watch(name, src.root):
            with d.lock:
                st.watched, st.watch_error = True, None
            log.info("%s: watched again", name)
            notify.status(d.status_line())
        else:
            with d.lock:
                st.watch_error = self.watcher.errors.get(name, st.watch_error)

    def source_for(self, path: str) -> TreeSource | None:
        """The tree source with the deepest root containing ``path``, or None."""
        best = None
        for src in trees(self.d.sources.values()):
            if src.contains(path) and (best is None or len(src.root) > len(best.root)):
                best = src
        return best

    def _accepts(self, source: str, path: str, is_dir: bool) -> bool:
        src = as_tree(self.d.sources.get(source))
        return src is not None and src.accepts(path, is_dir)

    def _on_overflow(self) -> None:
        log.warning("file events were lost (inotify queue overflow): reconciling every watched tree now")
        self.d.indexer.counters.inc("watch.overflow")
        self.d.jobs.run_soon(self.watcher.watched_sources() if self.watcher else set(self.d.sources))

    def _on_watch_limit(self, name: str) -> None:
        self.d.indexer.counters.inc("watch.limit")
        self.d.jobs.run_soon({name})

    # -- the change workers ---------------------------------------------------------------
    def _feed_loop(self) -> None:
        """Move the due changes from the change queue to the board, until the stop event."""
        while not self.d.stop_event.is_set():
            due = self.changes.take_due(timeout=0.5)
            if due:
                self.board.add(due)

    def _change_loop(self) -> None:
        """One change worker: apply the board's changes one at a time with a pipeline of its
        own (a :class:`Pipeline` serves one thread), until the stop event."""
        d = self.d
        with d.passes.pipeline() as pipeline:
            while not d.stop_event.is_set():
                ch = self.board.claim(timeout_seconds=0.5)
                if ch is None:
                    continue
                try:
                    self._apply_one(pipeline, ch)
                finally:
                    self.board.release(ch)

    def _apply_one(self, pipeline: Pipeline, ch: Change) -> None:
        """Apply one change; its errors are logged (and, in a cluster, its tree reconciled
        again), never raised."""
        d = self.d
        try:
            counts = self.apply_change(pipeline, ch.source, ch.path, ch.was_dir)
            if counts is not None and (counts.indexed or counts.deleted):
                with d.lock:
                    self._edits.append((time.monotonic(), ch.first))
                    del self._edits[:-10_000]  # commits failing: keep the newest
        except (StoreError, IndexUnavailable, RetryLater) as e:
            if not d.indexer.state.shared:
                log.error("%s: %s", display_path(ch.path), e)
                return
            # the cluster's server cannot be reached now: the tree is reconciled
            # again (2, 4, 8 ... s), so the change is made good once it answers
            log.error("%s: %s; its tree is reconciled again shortly", display_path(ch.path), e)
            d.jobs.writer_failed({ch.source})
        except IndexerdError as e:
            log.error("%s: %s", display_path(ch.path), e)
        except Exception:
            log.exception("failed on %s", display_path(ch.path))

    def apply_change(self, pipeline: Pipeline, name: str, path: str, was_dir: bool) -> PassCounts | None:
        """Process one path from the change queue (:meth:`TreeSource.apply_change`); None when
        source ``name`` is no longer a tree source (removed by a reload), or in a cluster another
        live node owns it (its pass was refused here)."""
        src = as_tree(self.d.sources.get(name))
        if src is None:
            return None
        st = self.d.states.get(name)
        if st is not None and st.owned_elsewhere:  # another node's tree: its changes are its own
            log.debug("%s: %s not applied: the tree belongs to another node", name, display_path(path))
            return None
        counts = PassCounts()
        src.apply_change(pipeline, path, was_dir, counts, cancel=self.d.stop_event)
        return counts

    def committed(self, seconds: float, started: float) -> None:
        """The writer committed (in its thread): its latency, and edit-to-searchable for every
        live edit submitted before the commit started (monotonic seconds)."""
        metrics = self.d.metrics
        metrics.commit_seconds.observe(seconds)
        now = time.monotonic()
        with self.d.lock:
            done = [first for submitted, first in self._edits if submitted <= started]
            self._edits = [e for e in self._edits if e[0] > started]
        for first in done:
            metrics.edit_to_searchable_seconds.observe(now - first)
