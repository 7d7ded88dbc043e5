"""What the crawler's process-wide state becomes when the process is a node of a cluster: the
politeness slots of every host take their shared lease rows, the robots.txt cache its shared
verdicts, and the shared frontier learns the node's name (each on a store connection of its
own).  Called through the source registry (:attr:`indexerd.sources.registry.Kind.cluster_join`),
so the core never imports the crawler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from indexerd.sources.web.hostleases import HostLeases
from indexerd.sources.web.politeness import HOST_SLOTS
from indexerd.sources.web.robots import SHARED as SHARED_ROBOTS
from indexerd.sources.web.sharedfrontier import CLUSTER


def join_cluster(node: str, open_store: Callable[[], Any]) -> Callable[[], None]:
    """Give the process's politeness slots, robots.txt cache and shared frontier the cluster's
    rows as node ``node`` (``open_store()`` opens a store connection); returns the callable
    that hands them back (leases released, connections closed)."""
    HOST_SLOTS.shared = HostLeases(open_store, node)
    CLUSTER.node = node
    SHARED_ROBOTS.store = open_store()

    def leave() -> None:
        leases, HOST_SLOTS.shared = HOST_SLOTS.shared, None
        CLUSTER.node = None
        robots_store, SHARED_ROBOTS.store = SHARED_ROBOTS.store, None
        for closable in (leases, robots_store):
            if closable is not None:
                closable.close()
    return leave
