"""Wiring for one state dir: sources from the config, the store, the lazily opened index and
writer, the start-up reconcile, and one pass over the sources (``indexerd index``; the daemon's
jobs call the same :meth:`Indexer.run_pass`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from indexerd.config import Config, resolve_node_name, resolve_state_dir
from indexerd.runtime import recovery
from indexerd.sources.claims import Claim, claim_pass
from indexerd.core.errors import ConfigError, StoreError
from indexerd.pipeline.stages import Counters, PassCounts, Pipeline
from indexerd.core.statedir import StateDir
from indexerd.core.store import ClusterStateStore, PgStore, StateStore, store_address
from indexerd.extract import isolation
from indexerd.index.opening import count_documents
from indexerd.sources.base import Source, TreeSource, as_tree, trees
from indexerd.sources.files.keys import display_path
from indexerd.sources.registry import adhoc_table, build_source, build_sources, join_cluster, kind

if TYPE_CHECKING:
    from indexerd.core.node import Node

log = logging.getLogger(__name__)
UTC = timezone.utc


@dataclass
class PassSummary:
    """The result of one pass: totals plus per-source counts (see :class:`PassCounts`); a source
    whose whole pass failed also has ``failed`` (why) in :meth:`as_dict`."""

    totals: PassCounts = field(default_factory=PassCounts)
    sources: dict[str, PassCounts] = field(default_factory=dict)
    elapsed_seconds: float = 0.0

    def as_dict(self) -> dict:
        d: dict = dict(self.totals.as_dict())
        d["elapsed_seconds"] = round(self.elapsed_seconds, 3)
        d["sources"] = {k: v.as_dict() for k, v in self.sources.items()}
        for k, v in self.sources.items():
            if v.failed:
                d["sources"][k]["failed"] = v.failed
        return d


def mark_pass_started(store: StateStore, name: str, kind: str, started_at: datetime, node: str | None = None) -> None:
    """Record that a pass of ``name`` runs on ``node`` (a cluster's node name, else None), so an
    interrupted one resumes at the next start; a store that cannot be written (full disk) does
    not stop the pass: it is logged."""
    try:
        store.pass_started(name, kind, started_at, node)
    except StoreError as e:
        log.warning("source %s: cannot mark the pass as running: %s", name, e)


def adhoc_source(cfg: Config, path: str) -> TreeSource:
    """The tree source for a path given on the command line (named by its real path), of the kind
    that makes one (:func:`~indexerd.sources.registry.adhoc_table`).

    Raises:
        ConfigError: no kind makes a source for a path, or the one that does is no tree.
    """
    real = os.path.realpath(path)
    kind_name, table = adhoc_table(real)
    src = as_tree(build_source(cfg, kind_name, table))
    if src is None:
        raise ConfigError(f"{path}: a {kind_name} source is no tree")
    return src


class Indexer:
    """Everything one writing process needs for a state dir.

    Args:
        cfg: the validated configuration.
        live: daemon mode for the writer (commit on drain, merge when idle).

    Use :meth:`open` (takes the state-dir lock), then :meth:`run_pass` as often as needed, then
    :meth:`close` (commits, releases the lock; safe to call twice).
    """

    def __init__(self, cfg: Config, *, live: bool = False) -> None:
        self.cfg = cfg
        self.live = live
        self.state = StateDir(resolve_state_dir(cfg), store_address(cfg))
        #: this node's name when the store is shared (a cluster), else None
        self.node: str | None = resolve_node_name(cfg) if self.state.shared else None
        self.sources: dict[str, Source] = build_sources(cfg)
        self.counters = Counters()
        self.cluster_node: Node | None = None  # this process in the cluster (a shared store)
        self._leave_kinds: Callable[[], None] | None = None  # undoes the kinds' cluster_join
        self._store: StateStore | None = None
        self._index = None
        self._writer = None
        self._pipeline: Pipeline | None = None

    @property
    def store(self) -> StateStore:
        """The state store (this thread's connection), once :meth:`open` ran.

        Raises:
            RuntimeError: the indexer is not open."""
        if self._store is None:
            raise RuntimeError("the indexer is not open")
        return self._store

    @property
    def cluster_store(self) -> ClusterStateStore:
        """The state store a cluster shares (PostgreSQL), once :meth:`open` ran.

        Raises:
            RuntimeError: the indexer is not open, or its store is not shared.
        """
        store = self.store
        if not isinstance(store, PgStore):
            raise RuntimeError("not in a cluster: the state store is not shared")
        return store

    @property
    def pipeline(self) -> Pipeline:
        """The document pipeline of the thread that opened the indexer, once :meth:`open` ran.

        Raises:
            RuntimeError: the indexer is not open."""
        if self._pipeline is None:
            raise RuntimeError("the indexer is not open")
        return self._pipeline

    # -- lifecycle ------------------------------------------------------------------------
    def open(self, mode: str = "index", *, rebuild: bool = False) -> None:
        """Lock the state dir, open the store, and reconcile it with the index if they may differ.

        Raises:
            StateDirLocked, SchemaTooNew, StoreError, IndexUnavailable, ConfigError.
        """
        from indexerd.index import index_dir, load_engine, read_identity, rebuild_reason, wanted_identity

        self.state.lock(mode)
        isolation.configure(isolation.Limits.from_config(self.cfg.extract))
        try:
            self.state.record_store()
            self._store = self.state.open_store()
            wanted = wanted_identity(load_engine(self.cfg.index.engine), self.cfg.index.fold_diacritics)
            if self.state.shared:
                recovery.check_cluster_identity(self.store, recovery.cluster_identity(wanted, self.cfg.index),
                                                rebuild=rebuild, index_documents=lambda: count_documents(
                                                    self.state.path, self.cfg.index))
                self._join_cluster()
            why = rebuild_reason(read_identity(self.state.path), wanted)
            if rebuild or why:
                recovery.rebuild(self.state.path, self.store, why)
            self._pipeline = Pipeline(self._get_writer, self.store, self.counters)
            if self.state.shared or (index_dir(self.state.path).exists() and (
                    self.live or not recovery.index_files_as_left(self.state.path, self.store))):
                # a corrupt index is reported now, not after a pass that looks fine; in a cluster
                # the index is the shared one even in a new state dir (the reconcile must read
                # it, not take every document of the cluster for missing); ``indexerd index``
                # leaves an index whose files are as the last process left them to the first
                # changed document (the daemon answers searches: it opens it)
                self.index()
            recovery.reconcile_after_crash(self.state.path, self.store, self.index)
        except BaseException:
            self.close()
            raise

    def _join_cluster(self) -> None:
        """Register this node, and give the process's politeness slots and robots.txt cache
        their shared rows (host leases, verdicts), each on a store connection of its own."""
        from indexerd.core.node import Node  # a node of a cluster only

        address = self.state.store_address
        assert self.node is not None and address is not None, "a shared store names its node"
        self.cluster_node = Node(self.node, address, lambda: sorted(self.sources))
        self.cluster_node.start()
        self._leave_kinds = join_cluster(self.node, self.state.open_store)

    def _leave_cluster(self) -> None:
        """Undo :meth:`_join_cluster` (the node marked stopped, its leases handed back); safe
        when not joined."""
        if self.cluster_node is None:
            return
        leave, self._leave_kinds = self._leave_kinds, None
        if leave is not None:
            leave()
        node, self.cluster_node = self.cluster_node, None
        node.stop()

    def index(self):
        """The index (:class:`~indexerd.index.base.SearchIndex` of the configured engine), opened
        (and created) on first use."""
        if self._index is None:
            from indexerd.index import open_index

            self._index = open_index(self.state.path, self.cfg.index)
        return self._index

    @property
    def opened_index(self):
        """The index if it is open, else None (never opens it: a status or a query must not)."""
        return self._index

    @property
    def current_writer(self):
        """The index writer if it was started, else None (never starts one)."""
        return self._writer

    def writer_running(self) -> bool:
        """Whether the writer was started and its thread still runs (it ends on a fatal error)."""
        return self._writer is not None and self._writer._thread.is_alive()

    def writer(self):
        """The :class:`~indexerd.pipeline.writer.IndexWriter` (started on first use; thread-safe
        once started: every thread submits to the one writer)."""
        return self._get_writer()

    def _get_writer(self):
        if self._writer is None:
            from indexerd.pipeline.writer import IndexWriter

            s = self.cfg.index
            self._writer = IndexWriter(
                self.index(), self.state.store_location, live=self.live,
                commit_interval_seconds=float(s.commit_interval),
                commit_batch=s.commit_batch if self.live else s.bulk_commit_batch, counters=self.counters)
        return self._writer

    def flush(self, timeout: float | None = None) -> None:
        """Make every submitted change searchable and stored."""
        if self._writer is not None:
            self._writer.flush(timeout)

    def close(self, writer_timeout: float = 30.0) -> bool:
        """Commit pending work, close the index and store, release the lock; safe twice.

        ``writer_timeout``: seconds to wait for the writer's last commit.  Returns False when
        the writer was still busy then: the index, store and lock are left to the process's
        exit (the caller ends the process), nothing is closed under the writer."""
        busy = False
        try:
            if self._writer is not None:
                w, self._writer = self._writer, None
                if not w.close(writer_timeout):
                    log.warning("the index writer is still busy after %.0f s; what it has not "
                                "committed is redone at the next start", writer_timeout)
                    busy = True
        finally:
            if not busy:
                self._leave_cluster()
                if self._index is not None:
                    ix, self._index = self._index, None
                    ix.close()
                    if self._store is not None and not self.state.shared:
                        recovery.record_index_files(self.state.path, self._store)
                if self._store is not None:
                    st, self._store = self._store, None
                    st.close()
                for src in self.sources.values():
                    src.close()
                self.state.unlock()
        return not busy

    def replace_sources(self, cfg: Config, sources: dict[str, Source]) -> None:
        """A reload: the new config and its sources (built by
        :func:`~indexerd.sources.registry.build_sources`) replace the old; the old sources are
        not closed (a pass of one may still be ending)."""
        self.cfg = cfg
        self.sources = sources

    # -- passes ---------------------------------------------------------------------------
    def _claim(self, src: Source) -> Claim:
        """In a cluster, whether this node may run ``src``'s pass now (an explicit request: a
        pass completed lately by another node runs again)."""
        if not self.state.shared:
            return Claim(True)
        assert self.node is not None, "a shared store names its node"
        return claim_pass(self.cluster_store, self.state.store_address, self.node, src, forced=True)

    def _one_pass(self, src: Source, start: str | None, counts: PassCounts, *, paths: bool, progress: bool,
                  forced: bool, cancel, recheck: bool = False) -> None:
        from indexerd.core.progress import Progress

        t0 = datetime.now(UTC)
        bar = Progress(src.name, tty=None if progress else False, unit=kind(src.kind).unit, walk=kind(src.kind).walk)
        if not paths:
            run = self.store.source_runs().get(src.name)
            if not forced and recovery.rebuild_pending(run, recovery.rebuilt_at(self.store)):
                forced = True  # the rebuilt index holds none of it: nothing is unchanged
                log.info("%s: the index was rebuilt since its last pass: every document is read again", src.name)
            mark_pass_started(self.store, src.name, src.kind, t0, self.node)
        try:
            tree = as_tree(src)
            if start is not None and not os.path.isdir(start) and tree is not None:
                tree.handle_path(start, self.pipeline, counts, forced=forced)
            else:
                src.run_pass(self.pipeline, counts, start=start, progress=bar, forced=forced, cancel=cancel,
                             recheck=recheck)
        finally:
            bar.close()
        if not paths:
            self.store.record_run(src.name, src.kind, t0, datetime.now(UTC), counts.as_dict(),
                                  completed=not counts.failed and not (cancel is not None and cancel.is_set()))

    def run_pass(self, names: list[str] | None = None, paths: list[str] | None = None, *,
                 forced: bool = False, progress: bool = True, cancel=None,
                 recheck: bool = False) -> PassSummary:
        """One pass over the named sources (default: all), or over ``paths``.

        ``recheck``: a web source asks every page it knows now, with its validators, whatever
        adaptive recrawl scheduled (``ctl crawl NAME --all``'s pass).

        ``cancel``: a :class:`threading.Event`; once set (a signal), the running source's pass
        ends early (requests in flight cut, SQL statements interrupted), what it did is
        committed, it is recorded as not completed (it resumes at the next run) and no further
        source starts.

        A path inside a configured source is scanned as part of it (deletions limited to that
        subtree); any other path becomes an ad-hoc source named by its real path.

        Raises:
            ConfigError: an unknown source name or a path that does not exist.
        """
        started = time.monotonic()
        summary = PassSummary()
        jobs: list[tuple[Source, str | None]] = []
        if paths:
            for p in paths:
                real = os.path.realpath(p)
                if not os.path.exists(real):
                    raise ConfigError(f"{p}: no such file or directory")
                tree = next((s for s in trees(self.sources.values()) if s.contains(real)), None)
                if tree is None:
                    tree = adhoc_source(self.cfg, real if os.path.isdir(real) else os.path.dirname(real))
                jobs.append((tree, None if real == tree.root else real))
        else:
            for n in names or list(self.sources):
                if n not in self.sources:
                    raise ConfigError(f"unknown source {n!r} (configured: {', '.join(self.sources) or 'none'})")
                jobs.append((self.sources[n], None))
        for src, start in jobs:
            if cancel is not None and cancel.is_set():
                break
            counts = summary.sources.setdefault(src.name, PassCounts())
            claim = self._claim(src)
            if not claim.run:
                counts.failed = f"not run on node {self.node}: {claim.reason}"
                log.warning("%s: %s", src.name, counts.failed)
                continue
            try:
                self._one_pass(src, start, counts, paths=bool(paths), progress=progress, forced=forced,
                               cancel=cancel, recheck=recheck)
            finally:
                claim.release()
            by_reason = counts.reasons_text()
            log.info("%s: %s%s", display_path(src.name), counts.as_dict(),
                     f"; skipped or failed: {by_reason}" if by_reason else "")
        self.flush()
        for c in summary.sources.values():
            summary.totals.add(c)
        summary.elapsed_seconds = time.monotonic() - started
        return summary
