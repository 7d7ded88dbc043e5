"""The one writer: a thread that owns the index session and the state store's document rows.

Sources and the pipeline never write the index; they :meth:`~IndexWriter.submit` operations.
The thread batches them and commits:

- in *live* mode (the daemon) as soon as its queue drains (after a 50 ms grace for more work)
  when the batch holds an *urgent* change (a live file event: someone is waiting to search
  it), and at the latest ``commit_interval_seconds`` after the first pending change (so a
  scheduled pass, a crawl or a queue drain commits about once a second, not every few
  documents), with
  ``merge=False`` so a commit never waits for a segment merge; the index's maintenance (a
  merge) runs when the writer has been idle as long as the engine asks
  (:meth:`~indexerd.index.base.SearchIndex.maintenance_delay`);
- in *bulk* mode (one-shot ``indexerd index``) every ``bulk_commit_batch`` documents, merging as
  the engine likes, so a big first index makes few, large segments.

Order of durability: the index commit happens first, then the store rows of that batch are
written in one SQLite transaction, with the index's commit token (``index_generation`` in the
store's meta table).  A crash between the two leaves the store behind the index, and the start-up
reconcile sees the token differ; the next pass simply re-indexes those documents (update-by-key
is idempotent); a document is never marked indexed in the store before it is searchable.

The writer knows only the :class:`~indexerd.index.base.IndexSession` protocol: the same key
written twice in one batch is the session's concern (the last write wins until commit).

This module is the producers' side (submit, the overlay of pending writes, flush, close); the
thread's batching and commits are :mod:`indexerd.pipeline.writerthread`.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

from indexerd.core.counts import Counters
from indexerd.core.errors import RetryLater
from indexerd.core.store import DocumentRecord
from indexerd.core.store.sharedfrontier import ClaimFence
from indexerd.pipeline.writerstate import PendingWrites, WriteOp, WriterStats
from indexerd.pipeline.writerthread import WriterThread
from indexerd.index import IndexDoc, SearchIndex

__all__ = ["IndexWriter", "WriterStats"]


class IndexWriter:
    """Owns the index session and the document rows of the state store.

    Args:
        index: the open index.
        store_location: where the state store is (a SQLite file's path or a PostgreSQL
            address); the thread opens its own connection.
        live: daemon mode (commit on drain, never merge on the hot path) vs bulk mode.
        commit_interval_seconds: the most a change may wait before it is committed.
        commit_batch: commit once this many documents are pending.
        counters: the daemon's named counters (a refused fenced write counts
            ``web.fenced_writes``), or None.

    An operation may carry the host claim its document was fetched under (``fence``, a
    :class:`~indexerd.core.store.sharedfrontier.ClaimFence`, in a cluster's crawl): the
    thread asks the store whether that claim still holds before the index or the store gets
    anything of it, and drops it when it does not (a node paused past its claim never
    overwrites the document of the host's new holder).

    Thread safety: :meth:`submit_*`, :meth:`flush`, :meth:`pending_record` and :meth:`close`
    may be called from any thread.
    """

    def __init__(self, index: SearchIndex, store_location, *, live: bool = False,
                 commit_interval_seconds: float = 1.0, commit_batch: int = 200,
                 max_queue: int = 64, counters: Counters | None = None) -> None:
        self.index = index
        #: named counters (``web.fenced_writes``), shared with ``ctl status``; None: none kept
        self.counters = counters
        self._store_location = store_location
        self.live = live
        self.commit_interval_seconds = commit_interval_seconds
        self.commit_batch = commit_batch
        self.stats = WriterStats()
        self._q: queue.Queue[WriteOp] = queue.Queue(maxsize=max_queue)
        self._pending = PendingWrites()
        self._loop = WriterThread(self, self._q, self._pending, store_location)
        self._thread = threading.Thread(target=self._loop.run, name="index-writer", daemon=True)
        self._closed = False
        #: called (in the writer thread) with the sources whose changes a failed write or commit
        #: dropped (None: unknown, maybe all); the daemon schedules a retry pass with it
        self.on_failure: Callable[[set[str] | None], None] | None = None
        #: called (in the writer thread) after each commit that made documents searchable, with
        #: its latency in seconds and its start (``time.monotonic()``): what was submitted before
        #: that start is searchable now (the daemon's metrics)
        self.on_commit: Callable[[float, float], None] | None = None
        self._thread.start()

    # -- producer side --------------------------------------------------------------------
    def submit_index(self, doc: IndexDoc, record: DocumentRecord, *, urgent: bool = True,
                     fence: ClaimFence | None = None) -> None:
        """Add or replace ``doc`` (by key) and then store ``record``.  ``urgent`` (live mode):
        commit as soon as the queue drains, not at the next ``commit_interval``.  ``fence``: the
        host claim it was fetched under (see the class docstring)."""
        self._put(WriteOp("index", doc.key, doc=doc, record=record, urgent=urgent, fence=fence))

    def submit_remove(self, key: str, record: DocumentRecord | None = None, *, urgent: bool = True,
                      fence: ClaimFence | None = None) -> None:
        """Delete ``key`` from the index; then delete its row (``record`` None) or store ``record``."""
        self._put(WriteOp("remove", key, record=record, urgent=urgent, fence=fence))

    def submit_remove_many(self, keys: list[str], *, urgent: bool = True, fence: ClaimFence | None = None) -> None:
        """:meth:`submit_remove` (rows deleted) for many keys in one operation: they are
        deleted from the index in one batch, never split by a live commit."""
        self._put(WriteOp("remove_many", rows=list(keys), urgent=urgent, fence=fence))

    def submit_record(self, record: DocumentRecord, *, fence: ClaimFence | None = None) -> None:
        """Store ``record`` without touching the index (skips, unchanged verdicts); never urgent."""
        self._put(WriteOp("record", record.key, record=record, urgent=False, fence=fence))

    def submit_stat_baseline(self, rows: list[tuple[int, int, str, int, int]]) -> None:
        """Record the ctime and inode of files whose rows predate them
        (:meth:`Store.set_stat_baseline`); nothing is indexed, never urgent."""
        if rows:
            self._put(WriteOp("baseline", rows=rows, urgent=False))

    def pending_record(self, key: str) -> tuple[bool, DocumentRecord | None]:
        """``(True, record_or_None)`` when a write for ``key`` is queued but not yet committed."""
        return self._pending.get(key)

    def flush(self, timeout: float | None = None, since: int | None = None) -> bool:
        """Commit everything submitted so far; True once it is searchable and stored, False on
        timeout.  ``since``: a value of ``stats.write_failures`` taken before the caller's first
        write; failures up to it belong to others and are not raised here.

        Raises:
            RetryLater: a commit since the previous flush failed (disk full, read-only): those
                changes are not in the index nor the store, and a caller that acknowledges work
                to someone else (a SQL queue) must not do so.
        """
        ev = threading.Event()
        op = WriteOp("barrier", event=ev)
        self._put(op)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not (done := ev.wait(0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic())))):
            if not self._thread.is_alive():  # it stopped on an error: nothing will answer
                raise RetryLater(f"the index writer stopped: {self._loop.failure!r}")
            if deadline is not None and time.monotonic() >= deadline:
                break
        if op.error and (since is None or self.stats.write_failures > since):
            raise RetryLater(op.error)
        return done

    def queue_depth(self) -> int:
        """Operations queued and not yet taken by the thread."""
        return self._q.qsize()

    def close(self, timeout: float = 30.0) -> bool:
        """Commit what is pending and stop the thread; safe to call twice.

        Returns False when the thread is still busy after ``timeout`` seconds (one huge document
        or commit cannot be cut): the caller then must not close the index or the store under
        it; what it had not committed is redone at the next start (the store lags the index).
        """
        if self._closed:
            return not self._thread.is_alive()
        self._closed = True
        if self._thread.is_alive():
            self._q.put(WriteOp("stop"))
            self._thread.join(timeout)
        if self._loop.failure is not None:
            raise self._loop.failure
        return not self._thread.is_alive()

    def _put(self, op: WriteOp) -> None:
        if self._loop.failure is not None:
            raise self._loop.failure
        if self._closed:
            raise RuntimeError("index writer is closed")
        self._pending.note(op)
        self._q.put(op)
