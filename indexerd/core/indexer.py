"""Wiring for one state dir: sources from the config, the store, the lazily opened index and
writer, the start-up reconcile, and one pass over the sources (``indexerd index``; the daemon's
jobs call the same :meth:`Indexer.run_pass`).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from indexerd.config import Config, FilesystemSource, resolve_state_dir, source_policy
from indexerd.core.metamap import DEFAULT_META_MAP, MetaMap
from indexerd.core.errors import ConfigError, StoreError
from indexerd.sources.files.keys import display_path
from indexerd.sources.files.scan import FileSource
from indexerd.core.counts import Counters, PassCounts
from indexerd.core.pipeline import Pipeline
from indexerd.core.statedir import StateDir
from indexerd.core.store import DocumentRecord, Store

log = logging.getLogger(__name__)
UTC = timezone.utc

#: documents of a removed source handed to the writer at once (a stop is noticed between batches)
FORGET_BATCH = 1000


@dataclass
class PassSummary:
    """The result of one pass: totals plus per-source counts (see :class:`PassCounts`); a source
    whose whole pass failed also has ``failed`` (why) in :meth:`as_dict`."""

    totals: PassCounts = field(default_factory=PassCounts)
    sources: dict[str, PassCounts] = field(default_factory=dict)
    elapsed_seconds: float = 0.0

    def as_dict(self) -> dict:
        d = self.totals.as_dict()
        d["elapsed_seconds"] = round(self.elapsed_seconds, 3)
        d["sources"] = {k: v.as_dict() for k, v in self.sources.items()}
        for k, v in self.sources.items():
            if v.failed:
                d["sources"][k]["failed"] = v.failed
        return d


def load_meta_map(path: str | None, cache: dict[str, MetaMap]) -> MetaMap:
    """The meta map at ``path`` (parsed once per path), or the default map."""
    if not path:
        return DEFAULT_META_MAP
    if path not in cache:
        cache[path] = MetaMap.load(os.path.expanduser(path))
    return cache[path]


def build_sources(cfg: Config, *, check_files: bool = False) -> dict:
    """Construct every configured source (``FileSource``, ``SqlFeed``, ``WebSource``) by name; meta maps are
    read (and refused if malformed) here, and a SQL source's password and URL are checked
    (:meth:`SqlFeed.check`), its SQLite file only when ``check_files`` (``check-config``; for the
    daemon and ``indexerd index`` a missing file fails that source's passes, like a missing
    tree root).  Nothing connects yet.

    Raises:
        ConfigError: a malformed meta map, an unset ``password_env``, a bad URL, a missing SQLite
            file (with ``check_files``), as ``FILE: sources.sql[N].KEY: ...``.
    """
    cache: dict[str, MetaMap] = {}
    out: dict = {}
    for src in cfg.sources.filesystem:
        pol = source_policy(cfg, src)
        out[src.name] = FileSource(src, pol, load_meta_map(pol.meta_map_path, cache))
    if cfg.sources.sql:
        from indexerd.sources.sql.feed import SqlFeed

        for i, src in enumerate(cfg.sources.sql):
            pol = source_policy(cfg, src)
            out[src.name] = SqlFeed(src, pol, load_meta_map(pol.meta_map_path, cache))
            out[src.name].check(f"{cfg.origin}: sources.sql[{i}]", files=check_files)
    if cfg.sources.web:
        from indexerd.sources.web.source import WebSource

        for src in cfg.sources.web:
            pol = source_policy(cfg, src)
            out[src.name] = WebSource(src, pol, load_meta_map(pol.meta_map_path, cache))
    return out


def mark_pass_started(store: Store, name: str, kind: str, started_at: datetime) -> None:
    """Record that a pass of ``name`` runs (so an interrupted one resumes at the next start);
    a store that cannot be written (full disk) does not stop the pass: it is logged."""
    try:
        store.pass_started(name, kind, started_at)
    except StoreError as e:
        log.warning("source %s: cannot mark the pass as running: %s", name, e)


def adhoc_source(cfg: Config, path: str) -> FileSource:
    """A filesystem source for a path given on the command line (named by its real path)."""
    real = os.path.realpath(path)
    src = FilesystemSource(name=real, path=real)
    pol = source_policy(cfg, src)
    return FileSource(src, pol, load_meta_map(pol.meta_map_path, {}))


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
        self.state = StateDir(resolve_state_dir(cfg))
        self.sources = build_sources(cfg)
        self.counters = Counters()
        self.store: Store | None = None
        self._index = None
        self._writer = None
        self.pipeline: Pipeline | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def open(self, mode: str = "index", *, rebuild: bool = False) -> None:
        """Lock the state dir, open the store, and reconcile it with the index if they may differ.

        Raises:
            StateDirLocked, SchemaTooNew, StoreError, IndexUnavailable, ConfigError.
        """
        from indexerd.index import index_dir, load_engine, read_identity, rebuild_reason, wanted_identity

        self.state.lock(mode)
        try:
            self.store = Store(self.state.store_path)
            why = rebuild_reason(read_identity(self.state.path), wanted_identity(load_engine(self.cfg.index.engine)))
            if rebuild or why:
                self._rebuild(why)
            self.pipeline = Pipeline(self._get_writer, self.store, self.counters)
            if index_dir(self.state.path).exists():
                self.index()  # a corrupt index is reported now, not after a pass that looks fine
            self._reconcile_if_needed()
        except BaseException:
            self.close()
            raise

    def index(self):
        """The index (:class:`~indexerd.index.base.SearchIndex` of the configured engine), opened
        (and created) on first use."""
        if self._index is None:
            from indexerd.index import open_index

            self._index = open_index(self.state.path, self.cfg.index)
        return self._index

    def _get_writer(self):
        if self._writer is None:
            from indexerd.core.writer import IndexWriter

            s = self.cfg.index
            self._writer = IndexWriter(
                self.index(), self.state.store_path, live=self.live,
                commit_interval_seconds=float(s.commit_interval),
                commit_batch=s.commit_batch if self.live else s.bulk_commit_batch)
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
                if self._index is not None:
                    ix, self._index = self._index, None
                    ix.close()
                if self.store is not None:
                    st, self.store = self.store, None
                    st.close()
                for src in self.sources.values():
                    if hasattr(src, "close"):
                        src.close()
                self.state.unlock()
        return not busy

    # -- reconcile ------------------------------------------------------------------------
    def _rebuild(self, why: str | None = None) -> None:
        """Make every document be read again into a new index: an index another engine or text
        analysis wrote (``why``) is deleted; one rebuilt on request (``--rebuild``, a corrupt
        index) is moved aside to ``index.broken-<UTC time>``."""
        from indexerd.index import index_dir

        ix_dir = index_dir(self.state.path)
        keys = self.store.keys()
        if why is not None:
            log.warning("%s: rebuilding the index from the sources; the %d documents the state store "
                        "knows are read again by the next pass of each source", why, len(keys))
            if ix_dir.exists():
                shutil.rmtree(ix_dir)
        elif ix_dir.exists():
            aside = self.state.path / f"index.broken-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
            shutil.move(str(ix_dir), str(aside))
            log.warning("moved the old index to %s", aside)
        self.store.reset_stats(keys)
        self.store.write_batch([], meta={"index_generation": ""})

    def _reconcile_if_needed(self) -> None:
        """After a crash the store may lag the index (or the index may be gone): repair both.

        The writer records the index's commit token (opaque, defined by the engine) with every
        store batch (meta ``index_generation``); when the token on disk differs, documents the
        store believes indexed but the index lacks are marked stale (re-read next pass), and
        documents only the index knows get a stale row (re-indexed if they still exist, deleted
        if not).
        """
        from indexerd.index import on_disk_token

        on_disk = on_disk_token(self.state.path)
        recorded = self.store.get_meta("index_generation")
        if on_disk is None and not self.store.keys(status="indexed"):
            return
        if recorded and on_disk is not None and recorded == on_disk:
            return
        started = time.monotonic()
        stored_indexed = self.store.keys(status="indexed")
        known = self.store.keys()
        missing = set(stored_indexed)
        orphans = []
        if on_disk is not None:
            for k, src in self.index().keys():
                missing.discard(k)
                if k not in known:
                    orphans.append(DocumentRecord(key=k, source=src, status="stale", reason="reconcile"))
        if missing:
            self.store.reset_stats(missing)
        token = self.index().commit_token() if on_disk is not None else ""
        self.store.write_batch(orphans, meta={"index_generation": token})
        if missing or orphans:
            log.warning("reconcile: %d documents missing from the index will be re-indexed, "
                        "%d unknown to the store will be checked (%.2f s)",
                        len(missing), len(orphans), time.monotonic() - started)

    # -- removed sources ------------------------------------------------------------------
    def removed_sources(self) -> list[str]:
        """Sources the store holds anything of that the config no longer names.  Ad-hoc trees of
        ``indexerd index PATH`` (named by their absolute path, which no configured name can be)
        are not configured sources and are kept."""
        return sorted(n for n in self.store.known_sources() - set(self.sources) if not n.startswith("/"))

    def forget_sources(self, names, pipeline: Pipeline | None = None, cancel=None) -> dict[str, int]:
        """Forget everything about each source in ``names`` (removed from the config): its
        documents leave the index and the store (through the writer, committed), then its crawl
        frontier, run record and meta values (a SQL source's full-load mark) go.

        Runs to the end before any pass of a new source starts (the daemon's start and reload
        call it first), so a source renamed in the config -- whose new name indexes the same keys
        -- never loses a document to the purge of its old name.  Interrupted (``cancel`` set, a
        ``kill -9``, a failed commit), it leaves the source's rows in the store and the next
        start finishes it.

        Returns ``{name: documents deleted}`` for the sources fully forgotten.

        Raises:
            RetryLater: the index commit failed (the rest is left for the next start).
        """
        pipeline = pipeline or self.pipeline
        done: dict[str, int] = {}
        for name in names:
            keys = sorted(pipeline.store.keys(source=name))
            for i in range(0, len(keys), FORGET_BATCH):
                if cancel is not None and cancel.is_set():
                    log.info("removal of source %s interrupted; it resumes at the next start", name)
                    return done
                pipeline.writer.submit_remove_many(keys[i:i + FORGET_BATCH], urgent=False)
            pipeline.flush()
            pipeline.store.forget_source(name)
            done[name] = len(keys)
            log.info("removed source %s: %d documents deleted, its state forgotten", name, len(keys))
        return done

    # -- passes ---------------------------------------------------------------------------
    def run_pass(self, names: list[str] | None = None, paths: list[str] | None = None, *,
                 forced: bool = False, progress: bool = True, cancel=None) -> PassSummary:
        """One pass over the named sources (default: all), or over ``paths``.

        ``cancel``: a :class:`threading.Event`; once set (a signal), the running source's pass
        ends early (requests in flight cut, SQL statements interrupted), what it did is
        committed, it is recorded as not completed (it resumes at the next run) and no further
        source starts.

        A path inside a configured source is scanned as part of it (deletions limited to that
        subtree); any other path becomes an ad-hoc source named by its real path.

        Raises:
            ConfigError: an unknown source name or a path that does not exist.
        """
        from indexerd.core.progress import UNITS, Progress

        started = time.monotonic()
        summary = PassSummary()
        jobs: list[tuple[object, str | None]] = []
        if paths:
            for p in paths:
                real = os.path.realpath(p)
                if not os.path.exists(real):
                    raise ConfigError(f"{p}: no such file or directory")
                src = next((s for s in self.sources.values() if s.kind == "filesystem" and s.contains(real)), None)
                if src is None:
                    src = adhoc_source(self.cfg, real if os.path.isdir(real) else os.path.dirname(real))
                jobs.append((src, None if real == src.root else real))
        else:
            for n in names or list(self.sources):
                if n not in self.sources:
                    raise ConfigError(f"unknown source {n!r} (configured: {', '.join(self.sources) or 'none'})")
                jobs.append((self.sources[n], None))
        for src, start in jobs:
            if cancel is not None and cancel.is_set():
                break
            counts = summary.sources.setdefault(src.name, PassCounts())
            t0 = datetime.now(UTC)
            bar = Progress(src.name, tty=None if progress else False, unit=UNITS.get(src.kind, "files"))
            if not paths:
                mark_pass_started(self.store, src.name, src.kind, t0)
            try:
                if start is not None and not os.path.isdir(start):
                    src.handle_path(start, self.pipeline, counts, forced=forced)
                else:
                    src.run_pass(self.pipeline, counts, start=start, progress=bar, forced=forced, cancel=cancel)
            finally:
                bar.close()
            if not paths:
                self.store.record_run(src.name, src.kind, t0, datetime.now(UTC), counts.as_dict(),
                                      completed=not counts.failed and not (cancel is not None and cancel.is_set()))
            log.info("%s: %s", display_path(src.name), counts.as_dict())
        self.flush()
        for c in summary.sources.values():
            summary.totals.add(c)
        summary.elapsed_seconds = time.monotonic() - started
        return summary
