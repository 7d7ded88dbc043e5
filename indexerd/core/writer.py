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
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from indexerd.core.errors import IndexerdError, RetryLater
from indexerd.index import IndexDoc, SearchIndex
from indexerd.core.store import DocumentRecord, Store

log = logging.getLogger(__name__)
UTC = timezone.utc


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


class FailureEpisode:
    """Logs a run of write failures (a full or read-only state dir) once, not once per document:
    the first failure at ERROR, the rest counted, and one WARNING with the count when a commit
    succeeds again.  Used by the writer thread only."""

    def __init__(self) -> None:
        self.count = 0
        self.since: float | None = None

    def failed(self, message: str) -> None:
        self.count += 1
        if self.since is None:
            self.since = time.monotonic()
            log.error("%s; further write failures are counted, not logged, until a commit succeeds", message)
        else:
            log.debug("%s", message)

    def recovered(self) -> None:
        if self.since is not None:
            log.warning("index writes work again: %d writes or commits had failed over %.0f s; what they "
                        "dropped is redone by the next pass", self.count, time.monotonic() - self.since)
            self.count, self.since = 0, None


@dataclass
class _Op:
    kind: str                       # "index" | "remove" | "remove_many" | "record" | "baseline" | "barrier" | "stop"
    key: str = ""
    urgent: bool = True             # live mode: commit as soon as the queue drains
    error: str | None = None        # barrier: why a commit since the last barrier failed
    doc: IndexDoc | None = None
    record: DocumentRecord | None = None
    rows: list | None = None        # baseline: (ctime_ns, ino, key, mtime_ns, size); remove_many: keys
    event: threading.Event | None = field(default=None, repr=False)


class IndexWriter:
    """Owns the index session and the document rows of the state store.

    Args:
        index: the open index.
        store_path: the state store file; the thread opens its own connection.
        live: daemon mode (commit on drain, never merge on the hot path) vs bulk mode.
        commit_interval_seconds: the most a change may wait before it is committed.
        commit_batch: commit once this many documents are pending.

    Thread safety: :meth:`submit_*`, :meth:`flush`, :meth:`pending_record` and :meth:`close`
    may be called from any thread.
    """

    def __init__(self, index: SearchIndex, store_path, *, live: bool = False,
                 commit_interval_seconds: float = 1.0, commit_batch: int = 200,
                 max_queue: int = 64) -> None:
        self.index = index
        self._store_path = store_path
        self.live = live
        self.commit_interval_seconds = commit_interval_seconds
        self.commit_batch = commit_batch
        self.stats = WriterStats()
        self._q: queue.Queue[_Op] = queue.Queue(maxsize=max_queue)
        self._pending_lock = threading.Lock()
        self._pending: dict[str, DocumentRecord | None] = {}   # key -> record (None = row deleted)
        self._thread = threading.Thread(target=self._run, name="index-writer", daemon=True)
        self._closed = False
        self._live_commits = 0  # live commits since the last maintenance
        self._failure: BaseException | None = None
        #: called (in the writer thread) with the sources whose changes a failed write or commit
        #: dropped (None: unknown, maybe all); the daemon schedules a retry pass with it
        self.on_failure: Callable[[set[str] | None], None] | None = None
        #: called (in the writer thread) after each commit that made documents searchable, with
        #: its latency in seconds and its start (``time.monotonic()``): what was submitted before
        #: that start is searchable now (the daemon's metrics)
        self.on_commit: Callable[[float, float], None] | None = None
        self._thread.start()

    def _notify_failure(self, sources: set[str] | None) -> None:
        if self.on_failure is not None:
            try:
                self.on_failure(sources)
            except Exception:  # the writer must survive its listener
                log.exception("writer failure callback failed")

    # -- producer side --------------------------------------------------------------------
    def submit_index(self, doc: IndexDoc, record: DocumentRecord, *, urgent: bool = True) -> None:
        """Add or replace ``doc`` (by key) and then store ``record``.  ``urgent`` (live mode):
        commit as soon as the queue drains, not at the next ``commit_interval``."""
        self._put(_Op("index", doc.key, doc=doc, record=record, urgent=urgent))

    def submit_remove(self, key: str, record: DocumentRecord | None = None, *, urgent: bool = True) -> None:
        """Delete ``key`` from the index; then delete its row (``record`` None) or store ``record``."""
        self._put(_Op("remove", key, record=record, urgent=urgent))

    def submit_remove_many(self, keys: list[str], *, urgent: bool = True) -> None:
        """:meth:`submit_remove` (rows deleted) for many keys in one operation: they are
        deleted from the index in one batch, never split by a live commit."""
        self._put(_Op("remove_many", rows=list(keys), urgent=urgent))

    def submit_record(self, record: DocumentRecord) -> None:
        """Store ``record`` without touching the index (skips, unchanged verdicts); never urgent."""
        self._put(_Op("record", record.key, record=record, urgent=False))

    def submit_stat_baseline(self, rows: list[tuple[int, int, str, int, int]]) -> None:
        """Record the ctime and inode of files whose rows predate them
        (:meth:`Store.set_stat_baseline`); nothing is indexed, never urgent."""
        if rows:
            self._put(_Op("baseline", rows=rows, urgent=False))

    def pending_record(self, key: str) -> tuple[bool, DocumentRecord | None]:
        """``(True, record_or_None)`` when a write for ``key`` is queued but not yet committed."""
        with self._pending_lock:
            if key in self._pending:
                return True, self._pending[key]
        return False, None

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
        op = _Op("barrier", event=ev)
        self._put(op)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not (done := ev.wait(0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic())))):
            if not self._thread.is_alive():  # it stopped on an error: nothing will answer
                raise RetryLater(f"the index writer stopped: {self._failure!r}")
            if deadline is not None and time.monotonic() >= deadline:
                break
        if op.error and (since is None or self.stats.write_failures > since):
            raise RetryLater(op.error)
        return done

    def queue_depth(self) -> int:
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
            self._q.put(_Op("stop"))
            self._thread.join(timeout)
        if self._failure is not None:
            raise self._failure
        return not self._thread.is_alive()

    def _put(self, op: _Op) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise RuntimeError("index writer is closed")
        if op.record is not None or op.kind == "remove":
            with self._pending_lock:
                self._pending[op.key] = op.record
        elif op.kind == "remove_many":
            with self._pending_lock:
                for k in op.rows:
                    self._pending[k] = None
        self._q.put(op)

    # -- the thread -----------------------------------------------------------------------
    def _run(self) -> None:
        store = Store(self._store_path)
        session = None
        upserts: dict[str, DocumentRecord] = {}
        deletes: set[str] = set()
        batch_keys: dict[str, DocumentRecord | None] = {}
        failed_since_barrier: list[str] = []
        docs_pending = 0
        removes_pending = 0  # of docs_pending: removals (they do not count toward commit_batch)
        urgent_pending = False
        first_pending_at: float | None = None
        last_work_at = time.monotonic()
        dirty_segments = False
        episode = FailureEpisode()

        def abandon_batch() -> None:
            """Drop the open session and the batch (a failed commit, or an index write that failed
            half way through a document): the store keeps its old rows, so the next pass redoes
            these documents."""
            nonlocal session, docs_pending, removes_pending, first_pending_at
            if session is not None:
                try:
                    session.cancel()
                except Exception:
                    pass
            session = None
            upserts.clear()
            deletes.clear()
            self._forget_pending(batch_keys)
            docs_pending, removes_pending, first_pending_at = 0, 0, None

        def commit() -> None:
            nonlocal session, docs_pending, removes_pending, first_pending_at, dirty_segments, urgent_pending
            urgent_pending = False
            started = time.monotonic()
            token = None
            if session is not None:
                try:
                    token = session.commit(merge=not self.live)
                    dirty_segments = dirty_segments or self.live
                    if self.live:
                        self._live_commits += 1
                except Exception as e:  # disk full, permission denied...: keep running
                    self.stats.commit_errors += 1
                    self.stats.last_error = f"index commit failed in {self.index.path}: {e}"
                    episode.failed(f"index commit failed in {self.index.path}, {docs_pending} changes "
                                   f"will be retried: {e}")
                    failed_since_barrier.append(f"index commit failed in {self.index.path}: {e}")
                    self.stats.write_failures += 1
                    self._notify_failure({r.source for r in upserts.values()} if not deletes else None)
                    abandon_batch()
                    return
                session = None
            if upserts or deletes:
                try:
                    if token is None:
                        token = self.index.commit_token()
                    store.write_batch(list(upserts.values()), deletes, meta={"index_generation": token})
                    episode.recovered()
                except IndexerdError as e:
                    self.stats.commit_errors += 1
                    self.stats.last_error = str(e)
                    failed_since_barrier.append(str(e))
                    self.stats.write_failures += 1
                    episode.failed(str(e))
            n_docs = docs_pending
            upserts.clear()
            deletes.clear()
            self._forget_pending(batch_keys)
            docs_pending, removes_pending, first_pending_at = 0, 0, None
            if n_docs:
                self.stats.commits += 1
                self.stats.last_commit_at = datetime.now(UTC)
                self.stats.last_commit_seconds = time.monotonic() - started
                log.debug("committed %d documents in %.3f s", n_docs, self.stats.last_commit_seconds)
                if self.on_commit is not None:
                    try:
                        self.on_commit(self.stats.last_commit_seconds, started)
                    except Exception:  # the writer must survive its listener
                        log.exception("writer commit callback failed")

        def need_session():
            nonlocal session
            if session is None:
                while True:
                    try:
                        session = self.index.session()
                        break
                    except RetryLater as e:
                        log.warning("%s; retrying", e)
                        time.sleep(1.0)
            return session

        try:
            while True:
                if first_pending_at is not None:
                    timeout = max(0.0, first_pending_at + self.commit_interval_seconds - time.monotonic())
                elif self.live and dirty_segments and \
                        (idle := self.index.maintenance_delay(self._live_commits)) is not None:
                    timeout = max(0.0, last_work_at + idle - time.monotonic())
                else:
                    timeout = None
                try:
                    op = self._q.get(timeout=timeout)
                except queue.Empty:
                    if first_pending_at is not None:
                        commit()
                    elif self.live and dirty_segments:
                        self._maintain()
                        dirty_segments = False
                    continue
                last_work_at = time.monotonic()
                if op.kind == "stop":
                    commit()
                    break
                if op.kind == "barrier":
                    commit()
                    if failed_since_barrier:
                        op.error = "; ".join(dict.fromkeys(failed_since_barrier))
                        failed_since_barrier.clear()
                    op.event.set()
                    continue
                if op.kind == "baseline":
                    try:
                        store.set_stat_baseline(op.rows)
                    except IndexerdError as e:  # the next scan records them again
                        log.warning("%s", e)
                    continue
                if op.kind == "remove_many":
                    if first_pending_at is None:
                        first_pending_at = time.monotonic()
                    urgent_pending = urgent_pending or op.urgent
                    need_session().delete_many(op.rows)
                    for key in op.rows:
                        batch_keys[key] = None
                        upserts.pop(key, None)
                        deletes.add(key)
                    docs_pending += len(op.rows)
                    removes_pending += len(op.rows)
                    self.stats.docs_deleted += len(op.rows)
                    if removes_pending >= max(self.commit_batch, 20_000):
                        commit()
                    elif self.live and urgent_pending and self._q.empty():
                        commit()
                    continue
                if first_pending_at is None:
                    first_pending_at = time.monotonic()
                urgent_pending = urgent_pending or op.urgent
                batch_keys[op.key] = op.record
                try:
                    if op.kind == "index":
                        need_session().update(op.doc)
                        docs_pending += 1
                        self.stats.docs_written += 1
                        deletes.discard(op.key)
                        upserts[op.key] = op.record
                    elif op.kind == "remove":
                        need_session().delete(op.key)
                        docs_pending += 1
                        removes_pending += 1
                        self.stats.docs_deleted += 1
                        if op.record is None:
                            upserts.pop(op.key, None)
                            deletes.add(op.key)
                        else:
                            deletes.discard(op.key)
                            upserts[op.key] = op.record
                    elif op.kind == "record":
                        deletes.discard(op.key)
                        upserts[op.key] = op.record
                except Exception as e:
                    # one bad document must not take the writer down; but an unwritable index
                    # (EACCES, ENOSPC) fails the whole batch, so flush() must say so
                    if not isinstance(e, OSError):
                        log.error("index write of %s failed: %s", op.key, e)
                        self.stats.last_error = f"{op.key}: {e}"
                    else:
                        episode.failed(f"index write of {op.key} failed in {self.index.path}: {e}")
                        self.stats.last_error = f"{op.key}: {e}"  # after the log: status readers see both
                        failed_since_barrier.append(f"index write failed in {self.index.path}: {e}")
                        self.stats.write_failures += 1
                        self._notify_failure({op.record.source} if op.record is not None else None)
                        # the engine's writer may be left inside the document: start again
                        abandon_batch()
                batch = self.commit_batch
                if docs_pending - removes_pending >= batch or len(upserts) >= max(batch, 2000) or \
                        removes_pending >= max(batch, 20_000):
                    commit()
                elif self.live and urgent_pending and self._q.empty():
                    time.sleep(0.05)  # grace: a burst usually brings more work
                    if self._q.empty():
                        commit()
                # else: a scheduled pass commits at commit_interval (or commit_batch) at the latest
        except BaseException as e:  # pragma: no cover - last-resort reporting
            self._failure = e
            log.exception("index writer stopped")
        finally:
            if session is not None:
                try:
                    session.cancel()
                except Exception:
                    pass
            store.close()

    def _forget_pending(self, batch_keys: dict) -> None:
        """Drop the overlay entries this batch wrote, unless a newer submission replaced them."""
        with self._pending_lock:
            for key, rec in batch_keys.items():
                if key in self._pending and self._pending[key] is rec:
                    del self._pending[key]
        batch_keys.clear()

    def _maintain(self) -> None:
        """The index's idle maintenance (a merge); a failure is logged and tried again later."""
        try:
            self.index.maintain()
            self.stats.merges += 1
            self._live_commits = 0
        except Exception as e:
            log.warning("idle merge skipped: %s", e)
