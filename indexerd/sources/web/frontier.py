"""The crawl frontier: URLs waiting to be fetched, one priority queue per host.

A URL is handed out only when its host's politeness slot is free (the process-wide
:class:`~indexerd.sources.web.politeness.HostSlots`) and the host's robots.txt is known; a URL robots.txt
forbids comes back marked ``skip`` instead, without any request (LCWA: parallel fetchers over one
shared frontier).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from indexerd.core.store.sharedfrontier import ClaimFence
from indexerd.sources.web.politeness import HostSlots
from indexerd.sources.web.robots import RobotsCache

#: Seconds a fenced host's URLs wait before the fence is asked again.
FENCED_WAIT_SECONDS = 0.25


@dataclass(frozen=True)
class Task:
    """One request the frontier hands to a worker.

    ``kind`` is ``page``, ``requisite`` (kept in the mirror, never indexed), ``sitemap`` or
    ``robots``; ``method`` ``GET`` or ``HEAD``;
    ``etag`` / ``last_modified`` are the stored validators, sent verbatim;
    ``skip`` is set instead of fetching when robots.txt forbids it or cannot be read;
    ``fence`` is the cluster claim its host was held under when the frontier handed it out
    (:attr:`Frontier.claim`; None: not fenced): what the answer writes carries that claim, not
    the one the node holds when the answer comes (a take-over may come in between).
    """

    url: str
    host: str
    kind: str = "page"
    hops: int = 0
    seed_depth: int = 1
    seq: int = 0
    method: str = "GET"
    etag: str | None = None
    last_modified: str | None = None
    origin: str | None = None
    redirects: int = 0
    attempts: int = 0
    front: bool = False
    skip: str | None = None
    fence: ClaimFence | None = None


class Frontier:
    """URLs waiting to be fetched, one priority queue per host; thread-safe.

    Args:
        order: ``breadth`` (fewest hops first, then discovery order) or ``depth`` (most hops
            first, newest first).
        slots: the process-wide politeness slots.
        robots: the source's robots.txt cache; a host's URLs wait until it is known.
        budget: page and sitemap requests allowed in this pass (``max_pages``).
        gate: ``gate(task) -> None or a reason word``, asked about each task just before it is
            handed out (the scope gate); a task with a reason comes back with ``skip`` set to
            it, without a request.  Called under the frontier's lock: it must be quick and
            must not call the frontier.

    :attr:`fence`, when set, is asked ``fence(host) -> bool`` right before a request to ``host``
    is handed out: False keeps the host's URLs waiting while the frontier is held, and out of
    this pass once it is let go (a cluster node whose claim on the host is not known to hold
    now: :meth:`~indexerd.sources.web.claimfences.ClaimFences.may_ask`).  The same rules as
    ``gate``: quick, under the lock.  :attr:`claim`, when set, is asked ``claim(url) ->
    ClaimFence or None`` for each task handed out, in the same critical section as the fence:
    the claim the request is made under (:attr:`Task.fence`).

    A URL taken by :meth:`take` stays *outstanding* until the coordinator calls :meth:`finish`,
    so workers do not stop while a result that may add URLs is being processed.  In a pass the
    cluster crawls together (:mod:`indexerd.sources.web.sharedfrontier`) the frontier is
    *held* (:meth:`hold`): an empty frontier does not end the pass until :meth:`let_go`, since
    other nodes may still queue URLs for this node's hosts.
    """

    def __init__(self, order: str, slots: HostSlots, robots: RobotsCache, budget: int,
                 gate: Callable[[Task], str | None] | None = None) -> None:
        self.order = order
        self.gate = gate
        self.fence: Callable[[str], bool] | None = None
        self.claim: Callable[[str], ClaimFence | None] | None = None
        self._gated: dict[str, Task] = {}  # per host: the head that last passed the gate
        self.slots = slots
        self.robots = robots
        self.budget = budget
        self.requests = 0
        self._queues: dict[str, list] = {}
        self._robots_pending: set[str] = set()
        self._dropped_hosts: dict[str, str] = {}
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._outstanding = 0
        self._busy: dict[str, int] = {}  # host -> tasks taken and not finished
        self._held = False
        self._stopped = False

    def _priority(self, t: Task) -> tuple:
        if t.front:
            return (-1, next(self._counter))
        if self.order == "depth":
            return (-t.hops, -t.seq, next(self._counter))
        return (t.hops, t.seq, next(self._counter))

    def put(self, task: Task) -> None:
        with self._cond:
            heapq.heappush(self._queues.setdefault(task.host, []), (self._priority(task), task))
            self._cond.notify_all()

    def drop_host(self, host: str, reason: str) -> None:
        """Hand every waiting URL of ``host`` back as skipped (``reason``) for this pass."""
        with self._cond:
            self._dropped_hosts[host] = reason
            self._cond.notify_all()

    def refund(self) -> None:
        """A request that does not spend the page budget (a 429 retry, the GET after a HEAD)."""
        with self._cond:
            self.requests -= 1

    def queued(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    def wake(self) -> None:
        """A host slot was released: waiting workers look again."""
        with self._cond:
            self._cond.notify_all()

    def hold(self) -> None:
        """An empty frontier does not end the pass until :meth:`let_go` (a shared pass)."""
        with self._cond:
            self._held = True

    def let_go(self) -> None:
        """The shared pass is over: an empty frontier ends it again."""
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def outstanding(self) -> int:
        """Tasks taken and not finished yet."""
        with self._cond:
            return self._outstanding

    def host_idle(self, host: str) -> bool:
        """Nothing of ``host`` (a :func:`~indexerd.sources.web.urls.host_key`) waits or is in
        flight."""
        with self._cond:
            return not self._queues.get(host) and not self._busy.get(host)

    def take_back(self, host: str, force: bool = False) -> list[Task] | None:
        """Take every waiting task of ``host`` out of the frontier (the host goes to another
        node); None, and nothing taken, while a task of it is in flight or its robots.txt is
        being read, unless ``force`` (the host is another node's already: what is in flight
        ends as it may)."""
        with self._cond:
            if not force and (self._busy.get(host) or host in self._robots_pending):
                return None
            q = self._queues.pop(host, [])
            self._gated.pop(host, None)
            return [t for _, t in q]

    def stop(self) -> None:
        """Make every :meth:`take` return None (cancel, or the coordinator failed)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def finish(self, task: Task) -> None:
        """The coordinator is done with a task :meth:`take` gave out."""
        with self._cond:
            self._outstanding -= 1
            left = self._busy.get(task.host, 0) - 1
            if left > 0:
                self._busy[task.host] = left
            else:
                self._busy.pop(task.host, None)
            if task.kind == "robots":
                self._robots_pending.discard(task.host)
            self._cond.notify_all()

    def take(self, cancel: threading.Event | None = None) -> Task | None:
        """The next task whose host is ready, its slot acquired (unless ``task.skip`` is set);
        blocks while nothing is ready; None when the pass is over (nothing outstanding, not
        held, and nothing queued but URLs of hosts the fence keeps shut; the budget spent; or
        stopped)."""
        with self._cond:
            while True:
                if self._stopped or (cancel is not None and cancel.is_set()):
                    return None
                task, wait = self._pick()
                if task is not None:
                    if self.claim is not None:  # the claim at request time, not at answer time
                        task = replace(task, fence=self.claim(task.url))
                    self._outstanding += 1
                    self._busy[task.host] = self._busy.get(task.host, 0) + 1
                    return task
                if wait is None and self._outstanding == 0 and not self._held:
                    return None  # nothing left anywhere: the pass is over
                self._cond.wait(timeout=min(wait if wait is not None else 0.5, 0.5))

    def _pick(self) -> tuple[Task | None, float | None]:
        """Under the lock: the best ready task, else (None, seconds until one may be ready)."""
        ready: list[tuple] = []  # (priority of the head, host) of hosts whose head may be fetched
        soonest: float | None = None
        for host, q in self._queues.items():
            if not q:
                continue
            if host in self._dropped_hosts:
                _, t = heapq.heappop(q)
                return replace(t, skip=self._dropped_hosts[host]), None
            if self.fence is not None and not self.fence(host):
                # while held, the claim may be confirmed again; let go, no claim is renewed:
                # the host's URLs wait for the next pass and do not keep this one open
                if self._held:
                    soonest = FENCED_WAIT_SECONDS if soonest is None else min(soonest, FENCED_WAIT_SECONDS)
                continue
            rules = self.robots.get(host)
            if rules is None:
                if host in self._robots_pending:
                    soonest = 0.5 if soonest is None else min(soonest, 0.5)
                    continue
                wait = self.slots.try_acquire(host)
                if wait == 0.0:
                    self._robots_pending.add(host)
                    return Task(url=host + "/robots.txt", host=host, kind="robots"), None
                soonest = wait if soonest is None else min(soonest, wait)
                continue
            head = q[0][1]
            if self.gate is not None and self._gated.get(host) is not head:
                reason = self.gate(head)
                if reason is not None:
                    heapq.heappop(q)
                    return replace(head, skip=reason), None
                self._gated[host] = head
            if rules.status == "unreachable":
                heapq.heappop(q)
                return replace(head, skip="robots-unreachable"), None
            if not rules.allowed(head.url):
                heapq.heappop(q)
                return replace(head, skip="robots"), None
            ready.append((q[0][0], host))
        if ready:
            if self.requests >= self.budget:
                return None, None if self._outstanding == 0 else 0.5
            for _, host in sorted(ready):  # best head first, until a host's slot is free
                wait = self.slots.try_acquire(host)
                if wait == 0.0:
                    _, t = heapq.heappop(self._queues[host])
                    self.requests += 1
                    return t, None
                soonest = wait if soonest is None else min(soonest, wait)
        return None, soonest
