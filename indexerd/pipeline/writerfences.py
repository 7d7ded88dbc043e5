"""The writer's fenced operations: pages a cluster node fetched under a host claim, kept aside
until the commit and written only if the store says, right before the index commit, that their
claim still holds (Kleppmann's fencing token; :mod:`indexerd.core.store.sharedfrontier`).

The index (Whoosh, tantivy: files) is not in the store's transaction, so the check cannot be
atomic with the commit: the window a take-over has to let a stale page in is the time from
:meth:`FencedWrites.sort` to the end of the index commit, not the batch's commit interval
(docs/scaling.md says so).  Used by the writer thread only.
"""

from __future__ import annotations

import logging

from indexerd.core.store import PgStore, StateStore
from indexerd.core.store.sharedfrontier import ClaimFence
from indexerd.pipeline.writerstate import WriteOp

__all__ = ["FencedWrites"]

log = logging.getLogger("indexerd.pipeline.writer")  # one logger for the writer, whichever side


class FencedWrites:
    """The open batch's operations fetched under a cluster claim (``op.fence`` set)."""

    def __init__(self) -> None:
        self.ops: list[WriteOp] = []
        self._logged: set[ClaimFence] = set()  # a refusal is logged once per claim

    def __len__(self) -> int:
        return len(self.ops)

    def add(self, op: WriteOp) -> None:
        """Keep ``op`` (``op.fence`` set) for the commit."""
        self.ops.append(op)

    def take(self) -> list[WriteOp]:
        """Every operation kept, in order; none is kept after."""
        ops, self.ops = self.ops, []
        return ops

    def sort(self, store: StateStore, ops: list[WriteOp]) -> tuple[list[WriteOp], list[WriteOp]]:
        """``(held, stale)``: ``ops`` whose claim still holds, and those whose claim no longer
        does, each in order; one question to the store
        (:meth:`~indexerd.core.store.sharedfrontier.SharedFrontierRows.frontier_stale`); a store
        that is not a cluster's holds every claim.

        Raises:
            IndexerdError: the store cannot say (StoreError).
        """
        if not isinstance(store, PgStore):
            return ops, []
        stale = store.frontier_stale({op.fence for op in ops if op.fence is not None})
        return [op for op in ops if op.fence not in stale], [op for op in ops if op.fence in stale]

    def refused(self, op: WriteOp, stats, counters) -> None:
        """``op`` is not written: counted in the writer's ``stats`` (``fenced_writes``) and
        ``counters`` (``web.fenced_writes``; None: none kept), logged once per claim."""
        stats.fenced_writes += 1
        if counters is not None:
            counters.inc("web.fenced_writes")
        fence = op.fence
        assert fence is not None  # only fenced operations are kept here
        if fence not in self._logged:
            self._logged.add(fence)
            log.warning("%s: a page of %s fetched under node %s's claim %d is not written: the host was "
                        "claimed since (by another node, or again); its holder's documents stay",
                        fence.source, fence.host, fence.node, fence.token)
