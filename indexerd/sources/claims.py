"""Which node runs a pass of a source, in a cluster (a state store on PostgreSQL).

- a **filesystem** source (a kind whose ``node_owned`` is set, :mod:`indexerd.sources.registry`)
  belongs to the node that has the tree: the one its ``node`` key
  names (the others do not even build it), else the node that ran its passes, alive or not
  -- two nodes scanning "the same" path on two machines would each delete the other's
  documents as gone; a tree moves to another node when its ``node`` key names that node;
- a **web** source's pass is crawled by every live node together (a kind whose
  ``pass_shared`` is set; the frontier is shared host by host,
  :mod:`indexerd.sources.web.sharedfrontier`): a node joins a pass that runs; the node that
  holds the source's lock begins a new one;
- a **SQL** source's drain runs on one node at a time: the node holding its :class:`~indexerd.core.store.cluster.SourceLock` (named by the kind's
  ``lock_name``: a SQL queue's by its database and queue query, so two sources on one queue
  also exclude each other).  A node
  that finds the lock held stands by (the daemon asks again every :data:`STANDBY_SECONDS`), so
  when the holder dies -- its lock goes with its connection -- another node takes the pass
  over at once, from the crawl rows and run mark the dead node left in the shared store.
  A pass that another node completed less than ``0.9 x interval`` ago is not run again (a pass
  ends once for the cluster), nor a web pass that began that long ago and is over (its pass
  state says so before the finishing node's run record does), unless forced (``ctl scan``,
  ``indexerd index``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import dataclass
from datetime import datetime, timezone

from indexerd.core.store.cluster import SourceLock
from indexerd.sources.registry import kind

if TYPE_CHECKING:
    from indexerd.core.store.protocols import ClusterStateStore

__all__ = ["Claim", "STANDBY_SECONDS", "claim_pass"]

UTC = timezone.utc
#: Seconds between two tries of a node standing by for a source another node runs.
STANDBY_SECONDS = 5.0
#: Seconds before a node asks again to join a web pass another node is beginning (seeding it
#: takes a fraction of a second: each try costs a lock attempt and one read).
JOIN_SECONDS = 0.2


@dataclass
class Claim:
    """The answer of :func:`claim_pass`: run the pass (``run``, holding ``lock`` if any, to be
    released after the pass), or not, saying why (``reason``), and whether to ask again in
    :data:`STANDBY_SECONDS` (``standby``: another node runs it now)."""

    run: bool
    reason: str = ""
    lock: SourceLock | None = None
    standby: bool = False
    error: bool = False
    retry_in: float = STANDBY_SECONDS

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def fair_share(shared_sources: int, alive_nodes: int) -> int:
    """How many passes of shared sources one node runs at once while others are alive:
    ``ceil(sources / nodes)``, so that the nodes together can always run every source."""
    return -(-max(shared_sources, 1) // max(alive_nodes, 1))


def claim_pass(store: ClusterStateStore, address, node: str, src, *, forced: bool, shared_sources: int = 1,
               now: datetime | None = None) -> Claim:
    """Whether node ``node`` runs a pass of ``src`` now (see the module docstring).

    ``store`` is the shared store (a :class:`~indexerd.core.store.PgStore`), ``address`` its
    :class:`~indexerd.core.store.PgStoreAddress` (the lock opens its own connection);
    ``shared_sources`` is how many sources of this node's config take a lock: a node already
    running its :func:`fair_share` of them leaves a new one to the other live nodes (it stands
    by, and takes it if none does), so the passes spread over the cluster.

    Raises:
        StoreError: the server cannot be reached.
    """
    now = now or datetime.now(UTC)
    k = kind(src.kind)
    if k.node_owned:
        run = store.source_runs().get(src.name)
        owner = run["node"] if run else None
        if owner in (None, node) or getattr(src.cfg, "node", None) == node:
            return Claim(True)  # nobody's yet, ours, or moved here by the config's `node`
        if any(n["name"] == owner and n["alive"] for n in store.nodes()):
            return Claim(False, f"this tree belongs to node {owner}, which is alive and runs its passes; "
                                f"set `node` in the source to say which node has it", error=True)
        # a stopped owner keeps its tree: this machine's directory of the same path may hold
        # other files, whose pass would delete the owner's documents as gone
        return Claim(False, f"this tree belongs to node {owner} (not running now; its documents stay "
                            f"as they are until it runs again); to move the tree to this node, set "
                            f'`node = "{node}"` in the source', error=True)
    if k.pass_shared and src.pass_running(store):
        return Claim(True)  # every node takes part in it
    lock = SourceLock(address, node, *k.cluster_lock(src))
    if not forced and not k.pass_shared and SourceLock.held_here:
        alive = sum(1 for n in store.nodes() if n["alive"])
        share = fair_share(shared_sources, alive)
        if alive > 1 and len(SourceLock.held_here) >= share:
            return Claim(False, f"this node runs its share ({share}) of the cluster's passes; "
                                f"leaving it to another node for now", standby=True)
    if not lock.try_acquire():
        if k.pass_shared and src.pass_running(store):
            return Claim(True)  # the holder has just begun it: take part at once
        holder = lock.holder() or "another node"
        if k.pass_shared:  # the holder is beginning a pass (seeding it): join it in a moment
            return Claim(False, f"node {holder} is beginning its pass; joining it", standby=True,
                         retry_in=JOIN_SECONDS)
        return Claim(False, f"its pass runs on node {holder}; standing by", standby=True)
    if not forced and k.pass_shared:  # the pass state is written before the run record: read it first
        begun = src.pass_begun_at(store)
        age = (now - begun).total_seconds() if begun is not None else None
        if age is not None and age < 0.9 * float(src.cfg.interval):
            lock.release()
            return Claim(False, f"its pass began {age:.0f} s ago and is over; next one due in "
                                f"{float(src.cfg.interval) - age:.0f} s")
    run = store.source_runs().get(src.name)  # read under the lock: the holder may have just finished
    # a shared pass's own state says it is over (else it was joined above): a running mark left
    # by a node that joined as it ended does not make the pass due again
    ended = run is not None and (k.pass_shared or run["running_since"] is None)
    if not forced and run is not None and ended and run["completed_at"] is not None:
        age = (now - run["completed_at"]).total_seconds()
        if age < 0.9 * float(src.cfg.interval):
            lock.release()
            by = f" by node {run['node']}" if run.get("node") and run["node"] != node else ""
            return Claim(False, f"its pass was completed {age:.0f} s ago{by}; next one due in "
                                f"{float(src.cfg.interval) - age:.0f} s")
    return Claim(True, lock=lock)
