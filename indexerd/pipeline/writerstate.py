"""What the writer keeps: queued operations, the overlay of pending writes, the open batch, its
counters, and the episode of write failures being logged.

The producers (:mod:`indexerd.pipeline.writer`) make :class:`WriteOp` s and note them in
:class:`PendingWrites`; the writer thread (:mod:`indexerd.pipeline.writerthread`) owns the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from indexerd.core.store import DocumentRecord
from indexerd.core.store.sharedfrontier import ClaimFence
from indexerd.index import IndexDoc

__all__ = ["WriterStats", "FailureEpisode", "WriteOp", "PendingWrites", "Batch"]

log = logging.getLogger("indexerd.pipeline.writer")  # one logger for the writer, whichever side


@dataclass
class WriterStats:
    """Counters the writer keeps; read by ``ctl status``.  Updated only by the writer thread."""

    commits: int = 0
    docs_written: int = 0
    docs_deleted: int = 0
    commit_errors: int = 0
    last_commit_at: datetime | None = None
    last_commit_seconds: float = 0.0
    last_error: str | None = None
    merges: int = 0
    write_failures: int = 0  # writes and commits that failed (a flush's ``since`` counts from it)
    fenced_writes: int = 0  # operations refused: fetched under a host claim that no longer held


class FailureEpisode:
    """Logs a run of write failures (a full or read-only state dir) once, not once per document:
    the first failure at ERROR, the rest counted, and one WARNING with the count when a commit
    succeeds again.  Used by the writer thread only."""

    def __init__(self) -> None:
        self.count = 0
        self.since: float | None = None

    def failed(self, message: str) -> None:
        """Count one failure; log it at ERROR when it opens an episode, else at DEBUG."""
        self.count += 1
        if self.since is None:
            self.since = time.monotonic()
            log.error("%s; further write failures are counted, not logged, until a commit succeeds", message)
        else:
            log.debug("%s", message)

    def recovered(self) -> None:
        """A write worked: close the episode with one WARNING giving its count and length."""
        if self.since is not None:
            log.warning("index writes work again: %d writes or commits had failed over %.0f s; what they "
                        "dropped is redone by the next pass", self.count, time.monotonic() - self.since)
            self.count, self.since = 0, None


@dataclass
class WriteOp:
    """One queued operation for the writer thread."""

    kind: str                       # "index" | "remove" | "remove_many" | "record" | "baseline" | "barrier" | "stop"
    key: str = ""
    urgent: bool = True             # live mode: commit as soon as the queue drains
    error: str | None = None        # barrier: why a commit since the last barrier failed
    doc: IndexDoc | None = None
    record: DocumentRecord | None = None
    rows: list | None = None        # baseline: (ctime_ns, ino, key, mtime_ns, size); remove_many: keys
    event: threading.Event | None = field(default=None, repr=False)
    #: the host claim the document was fetched under (a cluster's crawl), None: not fenced;
    #: written only while the store says the claim still holds
    fence: ClaimFence | None = None


class PendingWrites:
    """Writes submitted and not yet committed: key -> record (None: the row is deleted).

    Thread safety: every method may be called from any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, DocumentRecord | None] = {}

    def note(self, op: WriteOp) -> None:
        """Remember what ``op`` will write, if it writes a row."""
        if op.record is not None or op.kind == "remove":
            with self._lock:
                self._records[op.key] = op.record
        elif op.kind == "remove_many" and op.rows is not None:
            with self._lock:
                for k in op.rows:
                    self._records[k] = None

    def get(self, key: str) -> tuple[bool, DocumentRecord | None]:
        """``(True, record_or_None)`` when a write for ``key`` is pending, else ``(False, None)``."""
        with self._lock:
            if key in self._records:
                return True, self._records[key]
        return False, None

    def drop(self, op: WriteOp) -> None:
        """``op`` will write nothing (refused): what :meth:`note` remembered of it is dropped,
        unless a newer submission replaced it."""
        keys = op.rows if op.kind == "remove_many" and op.rows is not None else [op.key]
        self.forget({k: (op.record if op.kind != "remove_many" else None) for k in keys})

    def drop_all(self, ops: list[WriteOp]) -> None:
        """:meth:`drop` each of ``ops``."""
        for op in ops:
            self.drop(op)

    def forget(self, batch_keys: dict) -> None:
        """Drop the entries this batch wrote, unless a newer submission replaced them; empties
        ``batch_keys``."""
        with self._lock:
            for key, rec in batch_keys.items():
                if key in self._records and self._records[key] is rec:
                    del self._records[key]
        batch_keys.clear()


@dataclass
class Batch:
    """The writer thread's open batch: the rows its commit writes, and what the commit rules count.

    Attributes:
        upserts: key -> the record stored at the commit.
        deletes: keys whose rows the commit deletes.
        keys: key -> the record (None: deleted) each operation of the batch put in the overlay
            of pending writes, dropped from it once the batch is committed or abandoned.
        docs: index changes (updates and removals); ``removes``: of them, removals (they do not
            count toward ``commit_batch``).
        urgent: a change someone waits for is in it (live mode commits on drain).
        first_at: ``time.monotonic()`` at its first change; None while empty.
    """

    upserts: dict[str, DocumentRecord] = field(default_factory=dict)
    deletes: set[str] = field(default_factory=set)
    keys: dict[str, DocumentRecord | None] = field(default_factory=dict)
    docs: int = 0
    removes: int = 0
    urgent: bool = False
    first_at: float | None = None

    def begin(self, urgent: bool) -> None:
        """One more operation joins: start the commit clock if it is the first."""
        if self.first_at is None:
            self.first_at = time.monotonic()
        self.urgent = self.urgent or urgent

    def store_row(self, key: str, record: DocumentRecord) -> None:
        """Write ``record`` at the commit (a delete of the key queued before is dropped)."""
        self.deletes.discard(key)
        self.upserts[key] = record

    def delete_row(self, key: str) -> None:
        """Delete the row of ``key`` at the commit (a record queued before is dropped)."""
        self.upserts.pop(key, None)
        self.deletes.add(key)

    def clear(self, pending: PendingWrites) -> None:
        """Empty it (``urgent`` is left to the commit) and drop its entries from ``pending``."""
        self.upserts.clear()
        self.deletes.clear()
        pending.forget(self.keys)
        self.docs, self.removes, self.first_at = 0, 0, None
