"""One node's claims on the hosts of a pass the cluster crawls together, as fences: which host it
may ask now, and the claim (host, token) every write of a page carries.

A claim holds for the others until its ``claim_until`` (database time); a node asks a host only
while its claim is known to hold by this process's monotonic clock, counted from the round
that confirmed it, less :data:`FENCE_MARGIN_SECONDS` (Kleppmann's lease check, "How to do
distributed locking", 2016).  Each claim has a fencing token that grows at every hand-over
(:class:`~indexerd.core.store.sharedfrontier.ClaimFence`); the token a request is made under is
stamped on it when the frontier hands it out, and the store (crawl rows) and the writer
(documents) refuse what was fetched under a token that is no longer the host's.  Used by
:class:`~indexerd.sources.web.sharedfrontier.SharedFrontier`, from the coordinator thread,
and by the frontier under its lock (:meth:`ClaimFences.may_ask`, :meth:`ClaimFences.fence_for`:
dictionary look-ups).
"""

from __future__ import annotations

import logging
import time

from indexerd.core.store.sharedfrontier import ClaimFence, url_origin
from indexerd.sources.web.urls import host_key

log = logging.getLogger("indexerd.sources.web.sharedfrontier")  # one logger for the node's part

__all__ = ["FENCE_MARGIN_SECONDS", "ClaimFences"]

#: Seconds of a claim's remaining time a node leaves unused: the clock rates of the node and the
#: database server may differ a little, and a request handed out just before the limit still
#: has to reach the host.
FENCE_MARGIN_SECONDS = 2.0


class ClaimFences:
    """Node ``node``'s claims on the hosts of web source ``source``'s pass.

    Args:
        source: the web source's name.
        node: this node's name.
        owned: the origins (``scheme://host[:port]``) the node holds now (the caller's set,
            read here).
        counters: the pass's named counters (``web.fenced_writes``).
    """

    def __init__(self, source: str, node: str, owned: set[str], counters) -> None:
        self.source, self.node, self.owned, self.counters = source, node, owned, counters
        #: host key -> monotonic seconds until which this node's claim is known to hold
        self.fenced_until: dict[str, float] = {}
        #: origin -> the fencing token of this node's last claim on it (kept once the claim is
        #: lost: what was fetched under it is refused by the store)
        self.tokens: dict[str, int] = {}
        self._refusals_logged: set[tuple[str, int]] = set()

    def may_ask(self, host: str) -> bool:
        """Whether a request to ``host`` (a host key, ``scheme://host:port``) may start now: this
        node's claim on it is known to hold.  A host this node does not claim (a robots.txt
        asked for a URL it was offered) is not fenced."""
        until = self.fenced_until.get(host)
        return until is None or time.monotonic() < until

    def confirmed(self, origin: str, began: float, left: float) -> None:
        """The store said, in a round that began at ``began`` (monotonic), that ``origin``'s claim
        holds ``left`` more seconds."""
        self.fenced_until[host_key(origin + "/")] = began + left - FENCE_MARGIN_SECONDS

    def closed(self, origin: str) -> None:
        """No request to ``origin`` until a round confirms a claim on it again."""
        self.fenced_until[host_key(origin + "/")] = 0.0

    def fence_for(self, url: str) -> ClaimFence | None:
        """The claim this node fetches ``url`` under (the last one it had on its host), which
        every write for the page carries; None: a host this node never claimed (not fenced)."""
        origin = url_origin(url)
        token = self.tokens.get(origin)
        return ClaimFence(self.source, origin, self.node, token) if token is not None else None

    def fences(self) -> dict[str, ClaimFence]:
        """:meth:`fence_for` of every host this node claimed in the pass, by origin: what the
        crawl table's writes carry."""
        return {o: ClaimFence(self.source, o, self.node, t) for o, t in self.tokens.items()}

    def answered_too_late(self, fence: ClaimFence) -> bool:
        """Whether an answer to a request made under ``fence`` (``Task.fence``) comes after this
        node's claim on its host changed (another token: taken over, maybe claimed back; or
        lost): it writes nothing, neither its crawl row (it would carry the newer token) nor its
        document.  Counted ``web.fenced_writes``, logged once per claim."""
        if self.tokens.get(fence.host) == fence.token and fence.host in self.owned:
            return False
        self.counters.inc("web.fenced_writes")
        if (claim := (fence.host, fence.token)) not in self._refusals_logged:
            self._refusals_logged.add(claim)
            log.warning("%s: an answer from %s to a request node %s made under its claim %d is not written: "
                        "the host changed hands since", self.source, fence.host, self.node, fence.token)
        return True

    def refused(self, hosts: set[str], rows: int) -> None:
        """The store refused the crawl rows (``rows`` of them, deletions and outlinks aside) this
        node wrote for ``hosts``: its claims on them are lost (the next round drops them).
        Counted (``web.fenced_writes``), logged once per claim."""
        self.counters.inc("web.fenced_writes", max(rows, 1))
        for origin in sorted(hosts):
            self.closed(origin)  # no request to it before the next round
            claim = (origin, self.tokens.get(origin, 0))
            if claim not in self._refusals_logged:
                self._refusals_logged.add(claim)
                log.warning("%s: the crawl rows of %s that node %s wrote under its claim %d were refused by "
                            "the store: another node claimed the host since", self.source, origin, self.node,
                            claim[1])
