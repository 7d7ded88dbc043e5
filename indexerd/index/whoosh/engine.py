"""The Whoosh engine: :class:`WhooshIndex`, an index in ``<state_dir>/index``.

Outside contract relied on (Whoosh 2.7, the ``whoosh-reloaded`` fork):

- one writer at a time per index, enforced by ``fcntl.flock`` on ``MAIN_WRITELOCK``; the kernel
  drops the lock when the process dies, so there is never a stale lock (do not delete the file);
- a commit writes a new TOC and renames it into place, so a kill mid-commit leaves the previous
  generation readable; readers need no lock and see a snapshot;
- but a reader *finds* the TOC by listing the directory while the writer renames the new TOC in
  and deletes the old one, and POSIX leaves it unspecified whether ``readdir`` returns an entry
  added or removed meanwhile: a listing can see no TOC at all (``EmptyIndexError``, seen in CI
  from ``ctl status`` during a commit).  Readers retry (:meth:`WhooshIndex._retry_vanished`);
- ``create_in`` deletes every ``_MAIN_*`` file and writes an empty TOC, so it is only called on a
  directory that holds no TOC or segment file (a missed TOC must never become an empty index);
- ``update_document`` on the ``unique`` key field replaces the old copy (re-indexing is idempotent);
- ``DATETIME`` drops tzinfo, so every date is handed to Whoosh as naive UTC and read back as UTC.

The commit token is the TOC's generation number (``_MAIN_<generation>.toc``), as text.  Stored
text is kept zlib-compressed in a ``STORED`` field (``text_z``) for snippets.  The patches of
Whoosh's internals are in :mod:`indexerd.index.whoosh.patches`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Container, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from indexerd.core.errors import IndexUnavailable, QueryError, RetryLater
from indexerd.index.base import Hit, Sort, check_sort, directory_bytes
from indexerd.index.offload import AnalysisWorker
from indexerd.index.whoosh import patches, searching
from indexerd.index.whoosh.postingvalues import TASK as POSTINGS_TASK
from indexerd.index.whoosh.schema import keep_old_names_importable, new_schema
from indexerd.index.whoosh.searchers import SearcherPool
from indexerd.index.whoosh.ondisk import holds_index_files
from indexerd.index.whoosh import mergepolicy
from indexerd.index.whoosh.postingpool import MergeInterrupted
from indexerd.index.whoosh.session import WhooshSession

log = logging.getLogger(__name__)
UTC = timezone.utc

#: Defaults of ``[index.whoosh]`` when no settings are given.
DEFAULT_WRITER_MEMORY_BYTES = 16 * 1024 * 1024
DEFAULT_MERGE_IDLE_SECONDS = 600.0
#: Live commits (each a small segment) after which a merge runs after only a short idle.
MERGE_AFTER_COMMITS = 16
SHORT_IDLE_SECONDS = 2.0
#: Merge rounds one idle maintenance runs at most (each merges the smallest segments).
MAINTENANCE_ROUNDS = 8


class WhooshIndex:
    """The embedded Whoosh index in directory ``path`` (see :class:`~indexerd.index.base.SearchIndex`).

    Thread safety: readers may be called from any thread (each borrows its own searcher); one
    session at a time, opened by the writer thread.
    """

    engine = "whoosh"

    def __init__(self, ix, path: Path, *, writer_memory_bytes: int, merge_idle_seconds: float,
                 fold_diacritics: bool = True, analysis_worker: bool = True) -> None:
        self._ix = ix
        self.fold_diacritics = fold_diacritics
        self._searchers = SearcherPool(ix)
        self.path = path
        self.writer_memory_bytes = writer_memory_bytes
        self.merge_idle_seconds = merge_idle_seconds
        #: the thorough merge waits for a long idle: after a short maintenance, or in an index
        #: opened with more than one segment (None: not looked at yet)
        self._thorough_due: bool | None = None
        self._long_idle = False  # the last delay maintenance_delay gave was merge_idle
        #: the index was opened with MERGE_AFTER_COMMITS segments or more and no maintenance has
        #: run since (None: not looked at yet; only the writer thread asks)
        self._merge_owed: bool | None = None
        offload = analysis_worker and (os.cpu_count() or 1) > 1
        self._worker = AnalysisWorker(POSTINGS_TASK, fold_diacritics) if offload else None

    @classmethod
    def open(cls, path: Path, settings: Any | None = None, *, create: bool = True,
             fold_diacritics: bool = True) -> "WhooshIndex":
        """Open (or, with ``create``, create) the index in directory ``path``; its text is
        analysed with accents folded or kept (``fold_diacritics``, :mod:`indexerd.index.analysis`).

        ``settings``: the ``[index.whoosh]`` table (``writer_memory`` in bytes, ``merge_idle`` in
        seconds, ``analysis_worker``; None or a missing attribute: the defaults).

        Raises:
            IndexUnavailable: no index (``create`` False), or the directory holds something
                Whoosh cannot read (a corrupt or foreign index); the message says how to rebuild.
        """
        from whoosh import index as windex

        patches.install()
        keep_old_names_importable()
        path = Path(path)
        attempt = 0
        while True:
            try:
                if windex.exists_in(str(path)):
                    ix = windex.open_dir(str(path))
                elif holds_index_files(path):
                    # segments but no TOC in this listing: a commit is renaming one in (retry), or
                    # the TOC is gone for good (the retries run out: corrupt, rebuild)
                    raise FileNotFoundError(f"{path}: no TOC in this listing")
                elif create:
                    path.mkdir(parents=True, exist_ok=True)
                    ix = windex.create_in(str(path), new_schema())
                else:
                    raise IndexUnavailable(f"{path}: no index yet (run `indexerd index` first)")
                with ix.reader() as r:  # touches the TOC and opens each segment: corrupt files fail here
                    r.doc_count()
                    for fieldname in ("key", "content"):
                        r.field_length(fieldname)
                        next(iter(r.lexicon(fieldname)), None)
                break
            except IndexUnavailable:
                raise
            except FileNotFoundError:
                # a commit replaced the TOC (or a merge removed a segment) between listing the
                # directory and opening the file: the next generation is already there
                attempt += 1
                if attempt > 20:
                    raise IndexUnavailable(f"{path}: the index has segment files but no readable table "
                                           f"of contents (or keeps changing under the reader); if this "
                                           f"persists, rebuild it with `indexerd index --rebuild`") from None
                time.sleep(0.01 * attempt)
            except Exception as e:  # Whoosh raises many kinds on a damaged TOC/segment
                raise IndexUnavailable(
                    f"{path}: the index cannot be opened ({type(e).__name__}: {e}); "
                    f"rebuild it with `indexerd index --rebuild`") from None
        memory = getattr(settings, "writer_memory", None)
        idle = getattr(settings, "merge_idle", None)
        return cls(ix, path,
                   writer_memory_bytes=int(memory) if memory is not None else DEFAULT_WRITER_MEMORY_BYTES,
                   merge_idle_seconds=float(idle) if idle is not None else DEFAULT_MERGE_IDLE_SECONDS,
                   fold_diacritics=fold_diacritics,
                   analysis_worker=bool(getattr(settings, "analysis_worker", True)))

    # -- writing ----------------------------------------------------------------------------
    def session(self, *, timeout_seconds: float = 10.0) -> WhooshSession:
        """Open the single writer.

        Raises:
            RetryLater: the writer lock is held by another process for ``timeout_seconds``.
        """
        from whoosh.index import LockError

        try:
            w, lock = patches.open_writer(self._ix, memory_bytes=self.writer_memory_bytes,
                                          timeout_seconds=timeout_seconds)
        except LockError:
            w = None
        if w is None:
            raise RetryLater(f"{self.path}: index writer lock is held by another process")
        return WhooshSession(w, lock, fold_diacritics=self.fold_diacritics, on_commit=self._searchers.close_stale,
                             worker=self._worker, path=self.path)

    def maintenance_delay(self, commits_since: int) -> float | None:
        """A merge after ``merge_idle`` seconds of idleness, or after 2 s once 16 live commits
        (16 small segments, which slow every search) have piled up; after that short one, a
        thorough merge once ``merge_idle`` seconds pass without a write; None when neither is
        due.  An index opened with that many segments already (left by a process stopped before
        its merge: a daemon's first pass of 50,000 files left 252) owes the short merge too,
        whatever this process committed, and so does one whose short merge's rounds (at most
        :data:`MAINTENANCE_ROUNDS`) left that many; one opened with more than one segment (an
        ``indexerd index`` leaves one a commit batch) owes the thorough merge."""
        if self._merge_owed is None or self._thorough_due is None:
            segments = self.segment_count()
            if self._merge_owed is None:
                self._merge_owed = segments >= MERGE_AFTER_COMMITS
            if self._thorough_due is None:
                self._thorough_due = segments > 1
        if commits_since >= MERGE_AFTER_COMMITS or self._merge_owed:
            self._long_idle = False
            return SHORT_IDLE_SECONDS
        if commits_since > 0 or self._thorough_due:
            self._long_idle = True
            return self.merge_idle_seconds
        return None

    def maintain(self, interrupted: Callable[[], bool] | None = None) -> None:
        """Merge small segments and rewrite those more than a third deleted (empty commits with
        the idle merge policy), again while a round still lowers the segment count (at most
        :data:`MAINTENANCE_ROUNDS`): one round merges only the smallest few, and a daemon's
        index should reach the shape a one-shot ``indexerd index`` leaves (which merges at
        every commit), and so its size and query speed.  After ``merge_idle`` seconds without
        a write (the delay :meth:`maintenance_delay` gave last), one more commit merges every
        segment into one, or in an index of more than
        :data:`~indexerd.index.whoosh.mergepolicy.FULL_MERGE_MAX_DOCS` documents the segments
        still small beside the largest (:func:`~indexerd.index.whoosh.mergepolicy.merge_thoroughly`);
        after the short delay that thorough merge is left due for the next long idle.  Once
        ``interrupted()`` says a write is waiting, the merge under way is cancelled (the index
        as it was) and what is left stays due.

        Raises:
            RetryLater: another process holds the writer for a second.
        """
        try:
            _maintain(self, interrupted)
        except MergeInterrupted:
            self._merge_owed = self.segment_count() >= MERGE_AFTER_COMMITS
            self._thorough_due = True
            log.info("index: idle merge gave way to a write; it goes on at the next idle")

    # -- reading ----------------------------------------------------------------------------
    def commit_token(self) -> str:
        """The committed generation number, as text (grows by one per commit).

        Raises:
            IndexUnavailable: no TOC could be found after retries.
        """
        from whoosh.index import EmptyIndexError

        def read() -> str:
            gen = self._ix.latest_generation()
            if gen < 0:  # the listing missed the TOC (see the module docstring)
                raise EmptyIndexError(f"no TOC in {self.path}")
            return str(gen)

        return self._retry_vanished(read)

    def _retry_vanished(self, fn):
        """Run ``fn()`` again when a concurrent commit removed the TOC or a segment it was about
        to read (Whoosh deletes the previous generation's files at each commit), or when the
        directory listing caught no TOC at all (``EmptyIndexError``, see the module docstring).

        Raises:
            IndexUnavailable: still failing after 20 tries (about 2 s).
        """
        from whoosh.index import EmptyIndexError

        for attempt in range(20):
            try:
                return fn()
            except (FileNotFoundError, EmptyIndexError) as e:
                if attempt == 19:
                    raise IndexUnavailable(f"{self.path}: the index keeps changing under the reader "
                                           f"({type(e).__name__}: {e}); if this persists, rebuild it "
                                           f"with `indexerd index --rebuild`") from None
                time.sleep(0.01 * (attempt + 1))

    def doc_count(self) -> int:
        """Number of live documents."""
        return self._retry_vanished(self._ix.doc_count)

    def segment_count(self) -> int:
        """Number of segments in the latest generation."""
        return self._retry_vanished(lambda: len(self._ix._segments()))

    def keys(self) -> Iterator[tuple[str, str]]:
        """``(key, source)`` of every live document, streamed from one snapshot (one reader held
        open until the iteration ends)."""
        r = self._retry_vanished(self._ix.reader)
        with r:
            if r.doc_count_all() == 0:
                return  # an index with no segments has no columns (Whoosh raises)
            keys, sources = r.column_reader("key"), r.column_reader("source")
            for n in r.all_doc_ids():
                yield keys[n], sources[n]

    def size_bytes(self) -> int:
        """Bytes on disk (files a concurrent commit removes meanwhile are not counted)."""
        return directory_bytes(self.path)

    def status(self) -> dict[str, Any]:
        """``engine``, ``documents``, ``size_bytes`` and ``segments``."""
        return {"engine": self.engine, "documents": self.doc_count(), "size_bytes": self.size_bytes(),
                "segments": self.segment_count()}

    def count(self, query: str | None = None, *, since: datetime | None = None,
              until: datetime | None = None) -> int:
        """How many live documents match ``query`` (None: all) with ``since <= last_modified < until``."""
        if query is None and since is None and until is None:
            return self.doc_count()
        return self._with_retries(lambda: searching.count(self._searchers, query, since, until, self.fold_diacritics))

    def facets(self, query: str | None = None, *, since: datetime | None = None,
               until: datetime | None = None) -> dict[str, list[tuple[str, int]]]:
        """Matching documents counted per media type and source (Whoosh's grouped facets:
        :func:`~indexerd.index.whoosh.searching.facets`)."""
        return self._with_retries(lambda: searching.facets(self._searchers, query, since, until, self.fold_diacritics))

    def count_and_facets(self, query: str, *, since: datetime | None = None,
                         until: datetime | None = None) -> tuple[int, dict[str, list[tuple[str, int]]]]:
        """:meth:`count` and :meth:`facets` of ``query`` together, its matches evaluated once
        (:func:`~indexerd.index.whoosh.searching.count_and_facets`).

        Raises:
            QueryError, IndexUnavailable: as :meth:`search`.
        """
        return self._with_retries(lambda: searching.count_and_facets(self._searchers, query, since, until,
                                                                     self.fold_diacritics))

    def similar_terms(self, token: str, *, max_edits: int = 2) -> list[tuple[str, int]]:
        """The terms near ``token`` (:func:`~indexerd.index.whoosh.searching.similar_terms`)."""
        return self._with_retries(lambda: searching.similar_terms(self._searchers, token, max_edits))

    def search(self, query: str, *, limit: int = 10, since: datetime | None = None,
               until: datetime | None = None, snippet_chars: int = 240,
               sort: Sort = "relevance",
               snippets_for: Callable[[list[str]], Container[str]] | None = None,
               others_keys_only: bool = False) -> list[Hit]:
        """Run a query, retrying on a fresh snapshot when a concurrent commit or merge removed a
        segment file this reader had not opened yet (Whoosh opens segment columns lazily).

        Raises:
            QueryError: the query is malformed.
            IndexUnavailable: the index kept failing after retries.
        """
        check_sort(sort)
        return self._with_retries(lambda: searching.search(self._searchers, query, limit, since, until, snippet_chars,
                                                           sort, self.fold_diacritics, snippets_for,
                                                           others_keys_only))

    def _with_retries(self, fn):
        """Run a query ``fn()`` again on a fresh snapshot when a concurrent commit or merge removed
        what it was reading, as :meth:`_retry_vanished` does: 20 tries, about 2 s (6 tries, 0.15
        s, ran out while a busy writer committed again and again on a loaded machine).

        Raises:
            QueryError: at once (the query is malformed, not the index).
            IndexUnavailable: still failing after the last try.
        """
        attempts = 20
        for attempt in range(attempts):
            try:
                return fn()
            except QueryError:
                raise
            except Exception as e:  # FileNotFoundError, or Whoosh's TypeError on a vanished column
                if attempt == attempts - 1:
                    raise IndexUnavailable(f"{self.path}: search failed ({type(e).__name__}: {e}); "
                                           f"if this persists, rebuild with `indexerd index --rebuild`") from None
                log.debug("search retry %d after %s: %s", attempt + 1, type(e).__name__, e)
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Release the index object; safe to call twice."""
        ix, self._ix = getattr(self, "_ix", None), None
        if ix is not None:
            self._searchers.close()
            ix.close()
        worker = getattr(self, "_worker", None)
        if worker is not None:
            worker.close()


def _maintain(ix: WhooshIndex, interrupted: Callable[[], bool] | None) -> None:
    """:meth:`WhooshIndex.maintain` without its interruption handling."""
    before = start = ix.segment_count()
    ix._merge_owed = False
    # a merge of every segment into one needs no rounds before it: each would rewrite postings
    # that merge rewrites again
    full = ix._long_idle and patches.active() and ix.doc_count() <= mergepolicy.FULL_MERGE_MAX_DOCS
    for i in range(0 if full else MAINTENANCE_ROUNDS):
        after = _logged_merge(ix, f"idle merge round {i + 1}", before, interrupted=interrupted)
        if after >= before or after <= 1:
            break
        before = after
    if not ix._long_idle:
        ix._thorough_due = True
        # rounds that still leave 16 segments or more, having merged some, go on after the
        # next short idle, not after merge_idle (252 segments took about 20 rounds)
        ix._merge_owed = start > before >= MERGE_AFTER_COMMITS
        return
    if (before := ix.segment_count()) > 1:
        _logged_merge(ix, "thorough idle merge", before, thorough=True, interrupted=interrupted)
    ix._thorough_due = False


def _logged_merge(ix: WhooshIndex, what: str, before: int, *, thorough: bool = False,
                  interrupted: Callable[[], bool] | None = None) -> int:
    """One merging commit of ``ix`` (the idle policy; ``thorough``: the thorough merge),
    logged as ``index: WHAT: BEFORE -> AFTER segments in S s`` (a round of a big index takes
    seconds to minutes at full CPU); returns the segments after it.

    Raises:
        MergeInterrupted: ``interrupted()`` said True during the merge (logged with its time).
    """
    began = time.monotonic()
    try:
        ix.session(timeout_seconds=1.0).commit(merge=True, thorough=thorough, interrupted=interrupted)
    except MergeInterrupted:
        log.info("index: %s: stopped after %.1f s for a waiting write", what, time.monotonic() - began)
        raise
    after = ix.segment_count()
    log.info("index: %s: %d -> %d segments in %.1f s", what, before, after, time.monotonic() - began)
    return after
