"""The politeness slots of a cluster: one request in flight per host across every node, and the
delay between two requests to a host kept in the shared store, whichever node makes them.

:class:`HostLeases` is what :class:`~indexerd.sources.web.politeness.HostSlots` asks after its
own, in-process slot is free (``HostSlots.shared``): the host's lease row
(:meth:`~indexerd.core.store.cluster.ClusterRows.try_host_lease`).  A lease lasts the node's
``[store] lease`` (:attr:`~indexerd.core.store.cluster.ClusterTimings.host_lease`) and the node's
heartbeat renews the leases it holds, so a request of any length keeps its host while its node
lives, and a dead node's hosts are free again that long after its last beat.  A node stopped with SIGTERM hands its leases
back at once (:meth:`~indexerd.core.store.cluster.ClusterRows.node_stopped`).

If the shared store cannot be reached, no request starts (a host is never asked twice at once
because the database was down): the slot answers "wait :data:`UNREACHABLE_RETRY_SECONDS`".
"""

from __future__ import annotations

import logging
import threading
import time

from indexerd.core.errors import IndexerdError

log = logging.getLogger(__name__)

__all__ = ["HostLeases"]

#: Seconds before asking the shared store again when it could not be reached.
UNREACHABLE_RETRY_SECONDS = 2.0


class HostLeases:
    """Node ``node``'s leases on hosts in the shared store opened by ``open_store()``."""

    def __init__(self, open_store, node: str) -> None:
        self.node = node
        self._open_store = open_store
        self._store = None
        self._lock = threading.Lock()
        self._last_error = 0.0
        self._down_until = 0.0

    def _db(self):
        if self._store is None:
            self._store = self._open_store()
        return self._store

    def _failed(self, what: str, e: Exception) -> None:
        now = time.monotonic()
        if now - self._last_error > 60:
            log.warning("host leases: %s failed (no request starts for %.0f s, then it is tried again): %s",
                        what, UNREACHABLE_RETRY_SECONDS, e)
        self._last_error = now
        self._down_until = now + UNREACHABLE_RETRY_SECONDS
        store, self._store = self._store, None  # a new connection next time
        if store is not None:
            store.close()

    def try_acquire(self, host: str) -> tuple[float, int, float]:
        """``(wait, failures, last_delay)`` as :meth:`ClusterRows.try_host_lease`; ``wait`` 0.0:
        the host is this node's until :meth:`release`.  Called under the politeness slots'
        lock: while the store is unreachable it answers at once, without trying, for
        :data:`UNREACHABLE_RETRY_SECONDS` after each failure."""
        with self._lock:
            left = self._down_until - time.monotonic()
            if left > 0:
                return left, 0, 0.0
            try:
                db = self._db()
                return db.try_host_lease(host, self.node, db.timings.host_lease)
            except IndexerdError as e:
                self._failed(f"taking {host}", e)
                return UNREACHABLE_RETRY_SECONDS, 0, 0.0

    def release(self, host: str, delay: float, failures: int) -> None:
        """Hand ``host`` back: the next request to it, from any node, waits ``delay`` seconds."""
        with self._lock:
            try:
                self._db().release_host_lease(host, self.node, delay, failures)
            except IndexerdError as e:  # the lease runs out by itself
                self._failed(f"handing back {host}", e)

    def close(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()
