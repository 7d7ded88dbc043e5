"""The tantivy engine: :class:`TantivyIndex` and its write session.

Outside contract relied on (tantivy 0.27 through its official Python bindings, ``tantivy`` on PyPI):

- one ``IndexWriter`` at a time per index directory, enforced by an ``flock`` on
  ``.tantivy-writer.lock`` taken when the writer is created and released when it is dropped; the
  kernel drops it when the process dies, so there is never a stale lock.  A second writer fails at
  once (``ValueError`` ... ``LockBusy``): :meth:`TantivyIndex.session` retries until its timeout;
- a commit writes the new segments, then ``meta.json`` atomically (temp file and rename); a kill at
  any point leaves the previous commit readable, and files of an unfinished batch are removed by
  the next writer's garbage collection.  ``meta.json`` holds the commit's ``opstamp``, which grows
  with every operation and every commit, and which merges leave unchanged: it is this engine's
  commit token (:mod:`.token`);
- deletes by term apply to every document added before them, committed or not, and not to those
  added after: "delete the key, add the document" in one batch replaces it, and the same key
  updated twice before a commit leaves the last copy only;
- ``searcher.search(q, 0)`` panics (a Rust assertion): a limit is always at least 1;
- readers see a commit only after ``Index.reload()``: every read here reloads first (cheap: a
  ``meta.json`` read when nothing changed), so a search sees the latest commit of any process;
- merges run in the writer's background threads under tantivy's log merge policy (the bindings
  expose no explicit merge); ending a session waits for them, then drops the writer (the lock).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import tantivy

from indexerd.core.errors import IndexUnavailable, RetryLater
from indexerd.index.base import directory_bytes
from indexerd.index.heap import release_free_heap
from indexerd.index.offload import OrderedBatches

from .offload import TASK, AnalysisWorker, analyse_texts
from .schema import build_schema, queued_bytes, register_tokenizer, to_document
from .search import TantivySearch
from .token import read_token

log = logging.getLogger(__name__)
UTC = timezone.utc

#: tantivy refuses a writer with less heap than this per indexing thread.
MIN_HEAP_BYTES_PER_THREAD = 15_000_000
#: ``[index.tantivy]`` defaults (the config's ``TantivySettings`` has the same): the writer's
#: memory budget (bytes, split between its threads; a full budget flushes a segment) and its
#: indexing threads (0: tantivy picks from the cores; analysis runs in Python on the caller's
#: thread, so one indexing thread keeps up on two cores).
DEFAULT_WRITER_MEMORY_BYTES = 64 * 1024 * 1024
DEFAULT_WRITER_THREADS = 1
#: Analysed batches a session lets the worker run ahead of tantivy (bounds the memory held).
MAX_BATCHES_IN_FLIGHT = 4
#: A session is full (:meth:`TantivySession.full`) once its documents hold ``writer_memory``
#: divided by this: what waits for tantivy's indexing thread stays within half the budget.
QUEUE_BUDGET_DIVISOR = 2


def _texts_of(doc) -> tuple[str, str, str]:
    """What :func:`~.offload.analyse_texts` takes of a document."""
    return doc.title, doc.content, doc.headings


class TantivySession:
    """A batch of writes on the single tantivy writer; nothing is visible until :meth:`commit`.

    Operations reach tantivy in the order they were made.  Updates are analysed in batches of
    :data:`~indexerd.index.offload.BATCH_DOCS` documents (fewer when they are big:
    :func:`~indexerd.index.offload.batch_full`), by the index's
    :class:`~indexerd.index.offload.AnalysisWorker` (another core) once a batch is full, else here at :meth:`commit`; so a failure to write a document may be
    raised by a later call of the session, :meth:`commit` included.  :meth:`commit` and
    :meth:`cancel` end the session and release the writer lock whatever happens.  Not
    thread-safe: one thread (the index writer) uses it.
    """

    def __init__(self, index: "TantivyIndex", writer, worker: AnalysisWorker | None) -> None:
        self._index = index
        self._w = writer
        self._worker = worker
        self._batches = OrderedBatches(worker, analyse_texts, _texts_of, index.fold_diacritics,
                                       MAX_BATCHES_IN_FLIGHT)
        self._queued = 0  # bytes of the documents handed to tantivy (queued_bytes)

    def _writer(self):
        if self._w is None:
            raise IndexUnavailable(f"{self._index.path}: this index session has ended")
        return self._w

    def update(self, doc) -> None:
        """Add ``doc`` (an :class:`~indexerd.index.IndexDoc`), replacing any copy of its key,
        committed or added earlier in this session (the last write of a key wins).

        Raises:
            OSError: tantivy could not take a document of this session.
        """
        self._writer()
        if self._batches.update(doc):
            self._apply(block=self._batches.behind())

    def delete(self, key: str) -> None:
        """Delete the document of ``key`` (committed or added earlier in this session)."""
        self._writer()
        self._batches.delete(key)

    def delete_many(self, keys: Iterable[str]) -> None:
        """:meth:`delete` for every key (each is one term delete, applied in order)."""
        self._writer()
        for key in keys:
            self._batches.delete(key)

    def _apply(self, *, block: bool, last: bool = False) -> None:
        """Give tantivy the queued operations in order (see :class:`OrderedBatches`)."""
        w = self._writer()

        def add(op, analysed) -> None:
            d = to_document(op, analysed)
            self._queued += queued_bytes(op, analysed)
            w.delete_documents_by_term("key", op.key)
            try:
                w.add_document(d)
            except ValueError as e:
                raise OSError(f"{self._index.path}: cannot add {op.key}: {e}") from None

        self._batches.apply(add, lambda key: w.delete_documents_by_term("key", key), block=block, last=last)

    def commit(self, *, merge: bool) -> str:
        """Make the batch visible and durable, end the session; returns the new commit token.

        ``merge`` is the protocol's: tantivy merges after every commit under its own policy, and
        the session waits for those merges either way before it releases the writer.

        Raises:
            OSError: a document or the commit could not be written (full disk, read-only
                directory); the previous commit stays the index.
        """
        w = self._writer()
        try:
            self._apply(block=True, last=True)
        except BaseException:
            self.cancel()
            raise
        self._w = None
        try:
            opstamp = w.commit()
            w.wait_merging_threads()  # consumes the writer: the lock is released
        except ValueError as e:
            raise OSError(f"{self._index.path}: commit failed: {e}") from None
        finally:
            del w
            release_free_heap()  # the writer's buffers, freed in its threads' arenas
        return str(opstamp)

    def full(self) -> bool:
        """True once the documents handed to tantivy in this session hold
        :attr:`TantivyIndex.queue_budget_bytes`: tantivy's writer queues up to 10,000 documents
        for its indexing thread (``PIPELINE_MAX_SIZE_IN_DOCS``), outside its heap budget, and
        Python feeds them faster than one thread indexes them (a first index of 50,000 files
        held 150-250 MB there: bench/RESULTS.md); a commit waits until they are indexed."""
        return self._queued >= self._index.queue_budget_bytes

    def cancel(self) -> None:
        """Drop everything written since the session began and release the writer."""
        self._batches.clear()
        w, self._w = self._w, None
        if w is None:
            return
        try:
            w.rollback()
            w.wait_merging_threads()
        except Exception as e:  # the writer is dropped (the lock released) either way
            log.warning("%s: cancelling the index session: %s", self._index.path, e)
        finally:
            del w
            release_free_heap()


class TantivyIndex(TantivySearch):
    """The tantivy full-text index in one directory (``<state_dir>/index``).

    Thread safety: readers (:meth:`search`, :meth:`count`, :meth:`keys`...) may run in any
    thread, each on its own searcher; at most one :class:`TantivySession` is open at a time in
    the whole system (the writer lock, across processes), and only the writer thread opens one.
    """

    engine = "tantivy"

    def __init__(self, ix: tantivy.Index, path: Path, settings: Any | None, *,
                 fold_diacritics: bool = True) -> None:
        super().__init__(ix, path, fold_diacritics=fold_diacritics)
        self.writer_memory_bytes = int(getattr(settings, "writer_memory", DEFAULT_WRITER_MEMORY_BYTES))
        self.writer_threads = int(getattr(settings, "writer_threads", DEFAULT_WRITER_THREADS))
        #: bytes of documents a session hands tantivy before the writer commits it (``full``)
        self.queue_budget_bytes = max(1, self.writer_memory_bytes // QUEUE_BUDGET_DIVISOR)
        offload = getattr(settings, "analysis_worker", True) and (os.cpu_count() or 1) > 1
        self._worker = AnalysisWorker(TASK, self.fold_diacritics) if offload else None

    @classmethod
    def open(cls, path: str | Path, settings: Any | None = None, *, create: bool = True,
             fold_diacritics: bool = True) -> "TantivyIndex":
        """Open (or, with ``create``, create) the index in directory ``path``; its text is
        analysed with accents folded or kept (``fold_diacritics``, :mod:`indexerd.index.analysis`).

        ``settings``: the ``[index.tantivy]`` table (``writer_memory`` in bytes,
        ``writer_threads``, ``analysis_worker``; None or a missing attribute: the defaults).

        Raises:
            IndexUnavailable: there is no index and ``create`` is false, or tantivy cannot read
                the one there (damaged, another format version); the message says how to rebuild.
        """
        path = Path(path)
        rebuild = "rebuild it with `indexerd index --rebuild`"
        try:
            if (path / "meta.json").exists():
                ix = tantivy.Index.open(str(path))
            elif create:
                path.mkdir(parents=True, exist_ok=True)
                ix = tantivy.Index(build_schema(), path=str(path), reuse=False)
            else:
                raise IndexUnavailable(f"{path}: no index yet (run `indexerd index` first)")
            register_tokenizer(ix)
            ix.config_reader("manual")
            ix.reload()
            ix.searcher().num_docs  # opens every segment: damaged files fail here
        except IndexUnavailable:
            raise
        except Exception as e:  # ValueError/OSError from the bindings on a damaged directory
            raise IndexUnavailable(f"{path}: the index cannot be opened ({type(e).__name__}: {e}); "
                                   f"{rebuild}") from None
        return cls(ix, path, settings, fold_diacritics=fold_diacritics)

    # -- writing ---------------------------------------------------------------------------
    def session(self, *, timeout_seconds: float = 10.0, **_ignored) -> TantivySession:
        """Open the single writer (heap and threads from ``[index.tantivy]``).

        Raises:
            RetryLater: another process (or session) holds the writer lock for ``timeout_seconds``.
            IndexUnavailable: the writer cannot be created (the directory is not writable).
        """
        threads = max(0, self.writer_threads)  # 0: tantivy's choice, fewer if the memory is short
        heap = max(self.writer_memory_bytes, MIN_HEAP_BYTES_PER_THREAD * max(1, threads))
        deadline = time.monotonic() + timeout_seconds
        ix = self._ix
        if ix is None:
            raise IndexUnavailable(f"{self.path}: the index is closed")
        while True:
            try:
                return TantivySession(self, ix.writer(heap_size=heap, num_threads=threads), self._worker)
            except ValueError as e:
                if "LockBusy" not in str(e):
                    raise IndexUnavailable(f"{self.path}: cannot open the index writer: {e}") from None
                if time.monotonic() >= deadline:
                    raise RetryLater(f"{self.path}: index writer lock is held by another process") from None
                time.sleep(0.1)

    def maintenance_delay(self, commits_since: int) -> float | None:
        """None: tantivy merges segments after each commit (the session waits for them)."""
        return None

    def maintain(self, interrupted=None) -> None:
        """An empty commit, which lets tantivy's merge policy look at the segments again, and
        waits for the merges it starts (the bindings have no "merge everything" call, nor a way
        to stop one: ``interrupted`` is not asked).

        Raises:
            RetryLater: the writer is held by another process.
        """
        self.session(timeout_seconds=1.0).commit(merge=True)

    # -- reading ---------------------------------------------------------------------------
    def commit_token(self) -> str:
        """The latest commit's token (its opstamp as text; see :mod:`.token`).

        Raises:
            IndexUnavailable: ``meta.json`` cannot be read.
        """
        token = read_token(self.path)
        if token is None:
            raise IndexUnavailable(f"{self.path}: meta.json cannot be read; rebuild it with "
                                   f"`indexerd index --rebuild`")
        return token

    def keys(self, page: int = 10_000) -> Iterator[tuple[str, str]]:
        """``(key, source)`` of every live document, from one snapshot, ``page`` at a time."""
        s = self.searcher()
        everything = tantivy.Query.all_query()
        for offset in range(0, s.num_docs, page):
            for _score, addr in s.search(everything, limit=page, offset=offset, count=False).hits:
                d = s.doc(addr)
                yield d.get_first("key") or "", d.get_first("source") or ""

    def size_bytes(self) -> int:
        """Bytes on disk (files a concurrent commit removes meanwhile are not counted)."""
        return directory_bytes(self.path)

    def status(self) -> dict[str, Any]:
        """``engine``, ``documents``, ``size_bytes``, ``segments`` and ``last_commit`` (ISO UTC)."""
        s = self.searcher()
        try:
            mtime = datetime.fromtimestamp((self.path / "meta.json").stat().st_mtime, UTC).isoformat()
        except OSError:
            mtime = None
        return {"engine": self.engine, "documents": s.num_docs, "size_bytes": self.size_bytes(),
                "segments": s.num_segments, "last_commit": mtime}

    def close(self) -> None:
        """Release the index object and stop the analysis worker; safe to call twice."""
        self._ix = None
        if self._worker is not None:
            self._worker.close()
