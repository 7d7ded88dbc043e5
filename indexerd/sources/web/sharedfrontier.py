"""One node's part in a web pass the whole cluster crawls: the shared frontier, sharded by host.

In a cluster (a state store on PostgreSQL) every live node takes part in a web source's pass.
The ``crawl`` rows in the shared store are the frontier and the seen set, and each host of the
pass is crawled by the one node that claimed it
(:mod:`indexerd.core.store.sharedfrontier`; Nutch and StormCrawler partition the fetch work by
host the same way).  For its own hosts a node keeps the URL states in memory as a single node
does (the :class:`~indexerd.sources.web.scheduler.Scheduler`); a URL it finds on a host it does
not hold is *offered*: queued in the shared store for that pass unless some node queued it
already, and fetched by whichever node holds (or next claims) that host.

The node's coordinator calls :meth:`SharedFrontier.tick` between results, at most every
:data:`TICK_SECONDS`: it sends the offers, marks hosts whose work is done idle (after writing
their rows), claims hosts (its fair share, ``ceil(hosts with work / live nodes)``, or one more
when it has nothing to do -- so a host left by a dead node is taken over at once), reads the
URLs queued for its hosts (:class:`~indexerd.sources.web.handover.HostHandover` moves a host's
rows in and out of the node's memory), and tells when the pass is over for the cluster.  A node with nothing
left to do stays in the pass until it is over, a round every :data:`IDLE_TICK_SECONDS`, ready
to take a host that frees up (a quiet end: no leaving and joining again every few seconds).
Politeness needs
nothing new: every request still takes its host's lease
(:mod:`indexerd.sources.web.hostleases`), so a host changing hands keeps its delay.

**A node never asks a host it may have lost.**  A claim holds, for the others, until its
``claim_until`` (database time); each round reads how long every claim of this node still holds
(:meth:`~indexerd.core.store.sharedfrontier.SharedFrontierRows.frontier_claims`), and the
frontier hands out a request to a host only while the claim is known to hold, by this process's
monotonic clock from the moment that round began (the frontier's fence,
:class:`~indexerd.sources.web.claimfences.ClaimFences`).  A node paused past its claim
(SIGSTOP, a stall, a partition) wakes with every claim unconfirmed: its requests wait until the
next round has dropped the hosts another node took and confirmed the rest -- Kleppmann's lease
check made right before each request ("How to do distributed locking", 2016), with the
claim's expiry as the token's limit.

**A write under a lost claim is refused by the store.**  Each claim comes with a fencing token
that grows at every hand-over (:class:`~indexerd.core.store.sharedfrontier.ClaimFence`); the
node keeps the token of every host it claimed (a lost host's too: it is stale now), the crawl
rows it writes for a host carry it (through the crawl table), and so does every writer
operation for a page it fetched: the token its request was made under, stamped on the request
when the frontier hands it out.  The store refuses them once the host's token is another, and
an answer that comes after the node's own claim changed writes nothing; each refusal counts
``web.fenced_writes`` and is logged once per claim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import logging
import time

from indexerd.core.store.sharedfrontier import url_origin
from indexerd.sources.web.claimfences import ClaimFences
from indexerd.sources.web.handover import HostHandover
from indexerd.sources.web.urls import host_key
from indexerd.sources.web.urlstate import UrlState

if TYPE_CHECKING:
    from indexerd.core.store.protocols import ClusterStateStore

log = logging.getLogger(__name__)

__all__ = ["CLUSTER", "SharedFrontier", "TICK_SECONDS"]

#: Seconds between two rounds of a node with the shared store during a pass.
TICK_SECONDS = 0.25
#: Seconds a node's count of live nodes is reused before it is read again.
NODES_SECONDS = 1.0
#: Offers kept back before they are sent at once (between two ticks).
OFFER_BATCH = 500
#: Seconds a node with nothing to do and nothing to claim waits before its rounds slow down to
#: :data:`IDLE_TICK_SECONDS` (or, its page budget spent, before it leaves the pass to the nodes
#: still working).
LEAVE_SECONDS = 1.0
#: Seconds between two rounds of a node with nothing to do while the pass goes on elsewhere.
IDLE_TICK_SECONDS = 0.5


class ClusterMembership:
    """This process's node name in a cluster (None: not in one); set by the indexer when it
    joins the cluster (:meth:`~indexerd.runtime.indexer.Indexer.open`)."""

    node: str | None = None


#: This process's membership.
CLUSTER = ClusterMembership()


class SharedFrontier:
    """Node ``node``'s part in pass ``sched.pass_id`` of a web source (see the module docstring).

    Args:
        sched: the pass's scheduler; its ``shared`` is set to this object.
        store: the pass's shared store connection (a :class:`~indexerd.core.store.PgStore`),
            used from the coordinator thread only.
        node: this node's name.
        out_of_scope: ``out_of_scope(state, reason)`` forgets a known URL the config no longer
            covers (as the :class:`~indexerd.sources.web.seeding.Seeder`'s).
        write_pending: ``write_pending(key)`` -> whether the writer still holds a document of
            ``key`` not committed (:meth:`~indexerd.pipeline.stages.Pipeline.write_pending`): a
            host is idle only once every page of it is in the store, so that a node dying after
            it leaves no page the next holder would not know to ask again.
    """

    def __init__(self, sched, store: ClusterStateStore, node: str, out_of_scope, write_pending=lambda key: False) -> None:
        self.sched = sched
        self.hosts = HostHandover(sched, store, node, out_of_scope)  # a host's rows in and out
        self.write_pending = write_pending
        self.store = store
        self.node = node
        self.source = sched.src.name
        self.owned: set[str] = set()   # origins (``scheme://host[:port]``) this node claimed
        #: which hosts this node may ask now, and the tokens of its claims
        self.claims = ClaimFences(self.source, node, self.owned, sched.counters)
        #: origin -> [GET requests answered, requests without an answer] not yet in the store
        self._fetched: dict[str, list[int]] = {}
        self.active: set[str] = set()  # of them, those with URLs in memory or in flight
        self.offers: list[dict] = []
        self.dropped = False           # the page budget is spent: no more hosts
        self.over = False
        self.left = False              # nothing to do here while the pass goes on elsewhere
        self._idle_since: float | None = None
        self._next_tick = 0.0
        self._alive = (0.0, 1)
        sched.shared = self
        sched.frontier.fence = self.claims.may_ask
        sched.frontier.claim = self.claims.fence_for
        sched.table.fence(self.claims.fences, self.claims.refused)

    # -- what the scheduler asks -----------------------------------------------------------
    def fetched(self, url: str, answered: bool) -> None:
        """This node made a GET request for ``url`` (not a robots.txt), which the server
        ``answered`` (an HTTP status) or not: added to the cluster pass's counts of this node
        and the host at the next round (what every node's status shows)."""
        counts = self._fetched.setdefault(url_origin(url), [0, 0])
        counts[0 if answered else 1] += 1

    def _send_counts(self) -> None:
        """What this node fetched since the last round, into the store (kept for the next round
        when the store cannot be written)."""
        if self._fetched:
            counts = {h: (c[0], c[1]) for h, c in self._fetched.items()}
            self.store.frontier_count(self.source, self.sched.pass_id, self.node, counts)
            self._fetched = {}

    def owns(self, url: str) -> bool:
        """Whether this node crawls ``url``'s host in this pass."""
        return url_origin(url) in self.owned

    def offer(self, st: UrlState) -> None:
        """Queue ``st`` (a URL state of this pass) in the store, for whichever node holds its
        host (this one too, when its frontier's window is full): sent at the next tick (or once
        :data:`OFFER_BATCH` wait), as state ``spilled`` (in no node's memory)."""
        st.state = "spilled"
        self.sched.counters.inc("web.frontier.spilled")
        self.offers.append(st.as_row())
        if len(self.offers) >= OFFER_BATCH:
            self.flush()

    def flush(self) -> None:
        """Send the offers kept back (StoreError: the store cannot be written)."""
        if self.offers:
            offers, self.offers = self.offers, []
            self.store.frontier_offer(self.source, self.sched.pass_id, offers)

    def row(self, url: str) -> UrlState | None:
        """The stored state of ``url`` (a host this node does not hold), or None."""
        r = self.store.frontier_row(self.source, url)
        return UrlState.from_row(r) if r is not None else None

    # -- the rounds ------------------------------------------------------------------------
    def tick(self, now: bool = False) -> bool:
        """One round with the shared store (at most every :data:`TICK_SECONDS` unless ``now``);
        True once the pass is over for the cluster, or this node, its page budget spent, had
        nothing to do for :data:`LEAVE_SECONDS` (``left``): the frontier's hold is then let go,
        so the workers end.  Idle with a budget left: a round every :data:`IDLE_TICK_SECONDS`.

        Raises:
            StoreError: the shared store cannot be read or written.
        """
        if self.over or self.left:
            return True
        t = time.monotonic()
        if not now and t < self._next_tick:
            return False
        self._next_tick = t + TICK_SECONDS
        s, frontier = self.sched, self.sched.frontier
        self.flush()
        self._send_counts()
        if not self.dropped:
            claims = self.store.frontier_claim_rows(self.source, self.node, self.sched.pass_id)
            held = set(claims)
            self._drop_lost(self.owned - held)
            for origin, (left, token) in claims.items():
                self.claims.tokens[origin] = token
            self._adopt(held - self.owned)
            for origin, (left, token) in claims.items():
                self.claims.confirmed(origin, t, left)
        idle = sorted(o for o in self.active if frontier.host_idle(host_key(o + "/")) and not self._writing(o))
        if idle:
            s.persist(finished=False)  # the rows of what was done, before anyone may read them
            self.store.frontier_idle(self.source, self.node, idle)
            self.active.difference_update(idle)
        if not self.dropped and frontier.requests >= frontier.budget:
            self.dropped = True  # what is still queued waits for the next pass, as on one node
            s.persist(finished=False)
            self.store.frontier_drop(self.source, self.node)
            self.active.clear()
            log.info("%s: page budget of this node spent (%d requests); its hosts are left for the "
                     "next pass", self.source, frontier.requests)
        if not self.dropped:
            self._claim(idle_now=not self.active and frontier.outstanding() == 0 and frontier.queued() == 0)
            for origin in self.store.frontier_pending_hosts(self.source, self.node):
                self.owned.add(origin)
                self.active.add(origin)
                self.hosts.take_waiting(origin)
        if frontier.outstanding() == 0 and (frontier.queued() == 0 or self.dropped) and not self.active:
            if self.store.frontier_over(self.source, s.pass_id):
                self.over = True
                frontier.let_go()
            elif self._idle_since is None:
                self._idle_since = t
            elif t - self._idle_since >= LEAVE_SECONDS and self.dropped:
                self.left = True  # the nodes still working end the pass; this one comes back
                frontier.let_go()
            elif t - self._idle_since >= LEAVE_SECONDS:  # stays, quietly: a host may free up
                self._next_tick = t + IDLE_TICK_SECONDS
        else:
            self._idle_since = None
        return self.over or self.left

    def _drop_lost(self, lost: set[str]) -> None:
        """Hosts whose claim this node lost (its heartbeat could not renew it while the store
        was unreachable, and another node may hold them now): their waiting URLs leave this
        node's frontier and its memory, unwritten -- the store's rows are the next holder's."""
        if not lost:
            return
        s = self.sched
        busy = sorted(lost & self.active)
        for origin in lost:
            s.frontier.take_back(host_key(origin + "/"), force=True)
            self.claims.closed(origin)  # never asked again in this pass
        for url in [u for u in s.table.rows if url_origin(u) in lost]:
            s.table.forget_unwritten(url)
        self.owned.difference_update(lost)
        self.active.difference_update(lost)
        _log_lost(self.source, self.node, busy, sorted(lost))

    def _adopt(self, origins: set[str]) -> None:
        """Hosts the store says this node holds that this frontier does not know: claimed by a
        part of this node in the pass that ended without handing them back (the store was
        unreachable: a database restart).  No other node may claim them while this one lives, so
        they are taken up here, as a claim is (a retrial found such a host idle for 45 s)."""
        for origin in sorted(origins):
            self.owned.add(origin)
            self.active.add(origin)
            self.hosts.take_host(origin)
            self.hosts.take_waiting(origin)
            log.info("%s: node %s crawls %s in pass %d (its claim from before)", self.source, self.node,
                     origin, self.sched.pass_id)

    def _writing(self, origin: str) -> bool:
        """Whether a page of ``origin`` fetched in this pass still waits in the writer."""
        s = self.sched
        return any(st.pass_id == s.pass_id and self.write_pending(st.key)
                   for u, st in s.table.rows.items() if url_origin(u) == origin)

    def _claim(self, idle_now: bool) -> None:
        total, mine = self.store.frontier_load(self.source, self.sched.pass_id, self.node)
        share = -(-total // self._live_nodes()) if total else 0
        if mine > share + 1:
            mine -= self._shed(mine - share)
        limit = share - mine
        if limit <= 0 and idle_now:
            limit = 1  # nothing to do here: take a host nobody works on (a dead node's)
        began = time.monotonic()
        for origin, token in self.store.frontier_claim_tokens(self.source, self.sched.pass_id, self.node,
                                                              limit).items():
            self.claims.tokens[origin] = token
            self.claims.confirmed(origin, began, self.store.timings.host_claim)
            self.owned.add(origin)
            self.hosts.take_host(origin)
            log.info("%s: node %s crawls %s in pass %d", self.source, self.node, origin, self.sched.pass_id)

    def _shed(self, excess: int) -> int:
        """Give up to ``excess`` hosts back (this node holds more than its share of the hosts
        with work: more nodes are alive than when they were claimed, or the others finished
        theirs): hosts with nothing in flight, their waiting URLs put back in the store (state
        ``spilled``) before the host is released; returns how many were given back."""
        s, given = self.sched, list[str]()
        for origin in sorted(self.active):
            if len(given) >= excess:
                break
            if self._writing(origin):  # its next holder would take those pages for lost
                continue
            if self.hosts.put_back(origin):
                given.append(origin)
        if not given:
            return 0
        s.persist(finished=False)  # the rows back in the store before anyone may claim the host
        gone = set(given)
        for url in [u for u in s.table.rows if url_origin(u) in gone]:
            del s.table.rows[url]  # the next holder's now: never written from here
        for origin in given:
            self.store.frontier_release(self.source, self.node, origin)
            self.claims.closed(origin)
            self.owned.discard(origin)
            self.active.discard(origin)
        log.info("%s: node %s gives %s back, to spread the pass's hosts with work over the live nodes",
                 self.source, self.node, ", ".join(given))
        return len(given)

    def _live_nodes(self) -> int:
        at, n = self._alive
        if time.monotonic() - at > NODES_SECONDS:
            n = max(1, sum(1 for x in self.store.nodes() if x["alive"]))
            self._alive = (time.monotonic(), n)
        return n

    # -- the end ---------------------------------------------------------------------------
    def leave(self, finished: bool) -> None:
        """The pass ends on this node: offers sent; stopped before the end (``finished``
        False), its hosts are handed back so that the other nodes take them over at once."""
        self.flush()
        self._send_counts()
        if not finished:
            self.store.frontier_hand_back(self.source, self.node)


def _log_lost(source: str, node: str, busy: list[str], lost: list[str]) -> None:
    """Say that ``node`` lost its claims on ``lost``: a warning when some had work (``busy``);
    idle hosts only (the pass moved on: over, or the next one began) at debug level."""
    if busy:
        log.warning("%s: node %s lost its claim on %s (it ran out: the store was unreachable, or this "
                    "node was paused); another node crawls them now", source, node, ", ".join(busy))
    else:
        log.debug("%s: node %s no longer holds %s (nothing left to do there)", source, node, ", ".join(lost))
