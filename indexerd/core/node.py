"""This process as a node of a cluster (a state store on PostgreSQL): registered at start, a
heartbeat every quarter of its ``[store] lease`` from a thread of its own
(:class:`~indexerd.core.store.cluster.ClusterTimings`), and marked stopped (its host leases
handed back) at a clean stop.

A node that dies without stopping (``kill -9``, power loss) is dead to the others 1.5 leases
after its last beat; its source locks went with its connections at once and its host leases
run out on their own.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable

from typing import TYPE_CHECKING

from indexerd.core.errors import IndexerdError
from indexerd.core.store.cluster import ClusterTimings

if TYPE_CHECKING:
    from indexerd.core.store.postgresql import PgStoreAddress
    from indexerd.core.store import PgStore

log = logging.getLogger(__name__)

__all__ = ["Node"]


class Node:
    """Node ``name`` on the shared store at ``address`` (a
    :class:`~indexerd.core.store.PgStoreAddress`); its heartbeat connection is named
    ``indexerd-node:<name>`` in ``pg_stat_activity``, which is how the others know at once that
    a node killed with ``kill -9`` is gone.

    ``working_on()`` (set by the daemon) returns the short text ``ctl status`` shows for the
    node; ``sources()`` its configured source names.
    """

    def __init__(self, name: str, address: PgStoreAddress, sources: Callable[[], list[str]]) -> None:
        self.name = name
        self.address = address
        self.sources = sources
        self.working_on: Callable[[], str] = lambda: ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: PgStore | None = None
        #: this node's timings, from ``[store] lease``
        self.timings = ClusterTimings(address.lease_seconds)

    def start(self) -> None:
        """Register (raises StoreError when a live node has this name) and start beating."""
        from indexerd import __version__

        from indexerd.core.store import PgStore
        from indexerd.core.store.cluster import node_application

        store = self._store = PgStore(self.address, application_name=node_application(self.address.schema, self.name))
        try:
            store.register_node(self.name, socket.gethostname(), os.getpid(), __version__, self.sources())
        except BaseException:
            store.close()
            self._store = None
            raise
        self._thread = threading.Thread(target=self._beat, name="indexerd-heartbeat", daemon=True)
        self._thread.start()
        log.info("node %s: registered in the cluster's store", self.name)

    def _beat(self) -> None:
        failing = False
        store = self._store
        assert store is not None, "started"
        while not self._stop.wait(self.timings.heartbeat):
            try:
                store.heartbeat(self.name, self.working_on()[:200], self.sources())
                if failing:
                    log.info("node %s: heartbeat written again", self.name)
                failing = False
            except IndexerdError as e:
                if not failing:
                    log.warning("node %s: heartbeat failed (retried every %.0f s): %s", self.name,
                                self.timings.heartbeat, e)
                failing = True
            except Exception:  # the beat must outlive any surprise
                log.exception("node %s: heartbeat failed", self.name)

    def beat_now(self) -> None:
        """Write a heartbeat at once (after a reload changed the source list)."""
        if self._store is not None:
            try:
                self._store.heartbeat(self.name, self.working_on()[:200], self.sources())
            except IndexerdError as e:
                log.warning("node %s: heartbeat failed: %s", self.name, e)

    def stop(self) -> None:
        """Stop beating and mark the node stopped (its host leases handed back); safe twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timings.heartbeat + 1)
            self._thread = None
        store, self._store = self._store, None
        if store is not None:
            try:
                store.node_stopped(self.name)
                log.info("node %s: stopped; its host leases are handed back", self.name)
            except IndexerdError as e:
                log.warning("node %s: cannot mark it stopped (the others see it dead in a while): %s",
                            self.name, e)
            finally:
                store.close()
