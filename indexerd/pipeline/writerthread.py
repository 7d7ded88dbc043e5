"""The writer thread's side of :class:`~indexerd.pipeline.writer.IndexWriter`: batching and committing.

:class:`WriterThread` takes the operations the producers queued (:class:`~indexerd.pipeline.writerstate.WriteOp`), applies them
to one index session and one batch of store rows, and commits by the rules in
:mod:`indexerd.pipeline.writer` (live: on drain when urgent, else at the commit interval; bulk: every
``commit_batch`` documents), the index first, then the batch's rows with the commit token.  An
operation fetched under a cluster host claim waits for the commit, which asks the store whether
its claim still holds right before the index commit and writes it only then (Kleppmann's
fencing token; :mod:`indexerd.core.store.sharedfrontier`).  It logs under the writer's logger,
``indexerd.pipeline.writer``.
"""

from __future__ import annotations

import logging
import queue
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from indexerd.core.errors import IndexerdError, RetryLater
from indexerd.core.store import StateStore, open_store
from indexerd.pipeline.writerfences import FencedWrites
from indexerd.pipeline.writerstate import Batch, FailureEpisode, PendingWrites, WriteOp

if TYPE_CHECKING:
    from indexerd.pipeline.writer import IndexWriter

__all__ = ["WriterThread"]

log = logging.getLogger("indexerd.pipeline.writer")  # one logger for the writer, whichever side
UTC = timezone.utc


class WriterThread:
    """The body of the writer thread: one index session, one batch, the commit rules.

    Args:
        writer: the :class:`~indexerd.pipeline.writer.IndexWriter` it serves (its index, mode,
            commit settings, stats and callbacks are read from it).
        ops: the queue the producers fill.
        pending: the producers' overlay of uncommitted writes, emptied as batches commit.
        store_location: where the state store is (:data:`~indexerd.core.store.StoreLocation`);
            :meth:`run` opens its own connection.

    Used by the one thread that runs :meth:`run`; :attr:`failure` is read by others after it
    ended.
    """

    def __init__(self, writer: IndexWriter, ops: queue.Queue[WriteOp], pending: PendingWrites,
                 store_location) -> None:
        self.writer = writer
        self.ops = ops
        self.pending = pending
        self.store_location = store_location
        #: the exception that stopped the thread, or None
        self.failure: BaseException | None = None
        self.live_commits = 0  # live commits since the last maintenance
        self.store: StateStore | None = None
        self.session = None
        self.batch = Batch()
        self.failed_since_barrier: list[str] = []
        self.last_work_at = time.monotonic()
        self.dirty_segments = False
        self.episode = FailureEpisode()
        #: the open batch's operations fetched under a cluster claim (:meth:`_write_fenced`)
        self.fenced = FencedWrites()

    def run(self) -> None:
        """Take operations until a ``stop`` (committing what is pending) or an exception (kept
        in :attr:`failure` and logged); the session is cancelled and the store closed at the end."""
        store = self.store = open_store(self.store_location)
        try:
            self.dirty_segments = self.dirty_segments or _left_unmerged(self.writer)  # no commit first
            while True:
                op = self._next_op()
                if op is None:
                    continue
                self.last_work_at = time.monotonic()
                if op.kind == "stop":
                    self.commit()
                    break
                self._apply(op)
        except BaseException as e:  # pragma: no cover - last-resort reporting
            self.failure = e
            log.exception("index writer stopped")
        finally:
            if self.session is not None:
                try:
                    self.session.cancel()
                except Exception:
                    pass
            store.close()

    def _open_store(self) -> StateStore:
        """The state store, which :meth:`run` opened before the first operation."""
        assert self.store is not None
        return self.store

    def _next_op(self) -> WriteOp | None:
        """The next operation; None after waiting until a commit or the idle maintenance was due
        (and doing it)."""
        w = self.writer
        if self.batch.first_at is not None:
            timeout = max(0.0, self.batch.first_at + w.commit_interval_seconds - time.monotonic())
        elif w.live and self.dirty_segments and \
                (idle := w.index.maintenance_delay(self.live_commits)) is not None:
            timeout = max(0.0, self.last_work_at + idle - time.monotonic())
        else:
            timeout = None
        try:
            return self.ops.get(timeout=timeout)
        except queue.Empty:
            if self.batch.first_at is not None:
                self.commit()
            elif w.live and self.dirty_segments:
                self._maintain()
                # the index may want more after a while of idleness (Whoosh's thorough merge)
                self.dirty_segments = w.index.maintenance_delay(0) is not None
            return None

    def _apply(self, op: WriteOp) -> None:
        """One operation other than ``stop``: a barrier commits and answers, a baseline is
        written at once, the rest join the batch, which commits when the rules say so."""
        if op.kind == "barrier":
            self.commit()
            if self.failed_since_barrier:
                op.error = "; ".join(dict.fromkeys(self.failed_since_barrier))
                self.failed_since_barrier.clear()
            if op.event is not None:
                op.event.set()
            return
        if op.kind == "baseline":
            try:
                self._open_store().set_stat_baseline(op.rows or [])
            except IndexerdError as e:  # the next scan records them again
                log.warning("%s", e)
            return
        b = self.batch
        if op.fence is not None:
            b.begin(op.urgent)
            self.fenced.add(op)  # its claim is asked right before the commit
        elif op.kind == "remove_many":
            self._remove_many(op)
            return
        else:
            b.begin(op.urgent)
            b.keys[op.key] = op.record
            self._write(op)
        size = self.writer.commit_batch
        if b.docs - b.removes + len(self.fenced) >= size or len(b.upserts) >= max(size, 2000) \
                or b.removes >= max(size, 20_000) or (self.session is not None and self.session.full()):
            self.commit()
        elif self.writer.live and b.urgent and self.ops.empty():
            time.sleep(0.05)  # grace: a burst usually brings more work
            if self.ops.empty():
                self.commit()
        # else: a scheduled pass commits at commit_interval (or commit_batch) at the latest

    def _write_fenced(self) -> None:
        """Write into the session the batch's operations fetched under a cluster claim, right
        before the index commit (:mod:`indexerd.pipeline.writerfences`): those whose claim no
        longer holds write nothing (counted, logged), nor does any when the store cannot say
        (a failed write, reported at the next barrier)."""
        ops = self.fenced.take()
        if not ops:
            return
        try:
            held, stale = self.fenced.sort(self._open_store(), ops)
        except IndexerdError as e:
            self._failed(f"the claims {len(ops)} writes were fetched under cannot be checked: {e}", str(e), str(e))
            held, stale = [], []
            self.pending.drop_all(ops)
        for op in stale:
            self.pending.drop(op)
            self.fenced.refused(op, self.writer.stats, self.writer.counters)
        for op in held:
            if op.kind == "remove_many":
                self._remove_many(op, commit=False)
            else:
                self.batch.keys[op.key] = op.record
                self._write(op)

    def _remove_many(self, op: WriteOp, commit: bool = True) -> None:
        """Delete many keys from the index in one batch, never split by a live commit
        (``commit`` False: never committed here, the caller is committing)."""
        b = self.batch
        b.begin(op.urgent)
        keys = op.rows or []
        self._need_session().delete_many(keys)
        for key in keys:
            b.keys[key] = None
            b.delete_row(key)
        b.docs += len(keys)
        b.removes += len(keys)
        self.writer.stats.docs_deleted += len(keys)
        if not commit:
            return
        if b.removes >= max(self.writer.commit_batch, 20_000):
            self.commit()
        elif self.writer.live and b.urgent and self.ops.empty():
            self.commit()

    def _write(self, op: WriteOp) -> None:
        """An ``index``, ``remove`` or ``record`` operation into the session and the batch."""
        stats, b = self.writer.stats, self.batch
        try:
            if op.kind == "index":
                assert op.doc is not None and op.record is not None  # submit_index gives both
                self._need_session().update(op.doc)
                b.docs += 1
                stats.docs_written += 1
                b.store_row(op.key, op.record)
            elif op.kind == "remove":
                self._need_session().delete(op.key)
                b.docs += 1
                b.removes += 1
                stats.docs_deleted += 1
                if op.record is None:
                    b.delete_row(op.key)
                else:
                    b.store_row(op.key, op.record)
            elif op.kind == "record" and op.record is not None:
                b.store_row(op.key, op.record)
        except Exception as e:
            # one bad document must not take the writer down; but an unwritable index
            # (EACCES, ENOSPC) fails the whole batch, so flush() must say so
            if not isinstance(e, OSError):
                log.error("index write of %s failed: %s", op.key, e)
                stats.last_error = f"{op.key}: {e}"
            else:
                path = self.writer.index.path
                self._failed(f"index write of {op.key} failed in {path}: {e}",
                             f"index write failed in {path}: {e}", f"{op.key}: {e}")
                self._notify_failure({op.record.source} if op.record is not None else None)
                # the engine's writer may be left inside the document: start again
                self._abandon_batch()

    def _need_session(self):
        """The open index session, opened on first need (retried each second on RetryLater)."""
        if self.session is None:
            while True:
                try:
                    self.session = self.writer.index.session()
                    break
                except RetryLater as e:
                    log.warning("%s; retrying", e)
                    time.sleep(1.0)
        return self.session

    def _abandon_batch(self) -> None:
        """Drop the open session and the batch (a failed commit, or an index write that failed
        half way through a document): the store keeps its old rows, so the next pass redoes
        these documents."""
        if self.session is not None:
            try:
                self.session.cancel()
            except Exception:
                pass
        self.session = None
        self.pending.drop_all(self.fenced.take())
        self.batch.clear(self.pending)

    def commit(self) -> None:
        """Commit the index session, then write the batch's rows with the commit token.

        A failed index commit drops the batch (counted, reported to ``on_failure``, redone by
        the next pass); a failed row write is counted and reported at the next barrier.
        """
        w, stats, b = self.writer, self.writer.stats, self.batch
        started = time.monotonic()
        self._write_fenced()
        b.urgent = False
        token = None
        if self.session is not None:
            try:
                token = self.session.commit(merge=not w.live)
                self.dirty_segments = self.dirty_segments or w.live
                if w.live:
                    self.live_commits += 1
            except Exception as e:  # disk full, permission denied...: keep running
                stats.commit_errors += 1
                reason = f"index commit failed in {w.index.path}: {e}"
                self._failed(f"index commit failed in {w.index.path}, {b.docs} changes will be retried: {e}",
                             reason, reason)
                self._notify_failure({r.source for r in b.upserts.values()} if not b.deletes else None)
                self._abandon_batch()
                return
            self.session = None
        if b.upserts or b.deletes:
            try:
                if token is None:
                    token = w.index.commit_token()
                self._open_store().write_batch(list(b.upserts.values()), b.deletes, meta={"index_generation": token})
                self.episode.recovered()
            except IndexerdError as e:
                stats.commit_errors += 1
                self._failed(str(e), str(e), str(e))
        n_docs = b.docs
        b.clear(self.pending)
        if n_docs:
            stats.commits += 1
            stats.last_commit_at = datetime.now(UTC)
            stats.last_commit_seconds = time.monotonic() - started
            log.debug("committed %d documents in %.3f s", n_docs, stats.last_commit_seconds)
            if w.on_commit is not None:
                try:
                    w.on_commit(stats.last_commit_seconds, started)
                except Exception:  # the writer must survive its listener
                    log.exception("writer commit callback failed")

    def _failed(self, logged: str, reason: str, last_error: str) -> None:
        """A write or commit failed: log it (once an episode), then show it in the stats (after
        the log: status readers see both), and give ``reason`` to the next barrier."""
        self.episode.failed(logged)
        self.writer.stats.last_error = last_error
        self.failed_since_barrier.append(reason)
        self.writer.stats.write_failures += 1

    def _notify_failure(self, sources: set[str] | None) -> None:
        if self.writer.on_failure is not None:
            try:
                self.writer.on_failure(sources)
            except Exception:  # the writer must survive its listener
                log.exception("writer failure callback failed")

    def _maintain(self) -> None:
        """The index's idle maintenance (a merge; it gives way to a waiting operation)."""
        try:
            self.writer.index.maintain(interrupted=lambda: not self.ops.empty())
            self.writer.stats.merges += 1
            self.live_commits = 0
        except Exception as e:
            log.warning("idle merge skipped: %s", e)


def _left_unmerged(writer) -> bool:
    """True when a live writer's index asks for maintenance now (an index an earlier process
    left with many segments); False, logged, when the index cannot say (the next commit asks
    again)."""
    try:
        return bool(writer.live) and writer.index.maintenance_delay(0) is not None
    except IndexerdError as e:
        log.warning("could not tell whether the index needs merging: %s", e)
        return False
