"""A host changing hands in a web pass the cluster crawls: its URL states move between the
shared store and one node's scheduler.

When a node claims a host (or finds it holds one from before), what the store knows of the
host's URLs in this pass replaces what the node had in memory, and what waits in the store for
it comes into the node's frontier as far as its window has room; when the node gives a host
back, the host's waiting URLs go back to the store (state ``spilled``) first.  Which hosts a
node claims, sheds or lost is :class:`~indexerd.sources.web.sharedfrontier.SharedFrontier`'s
part; this module only moves the rows (:mod:`indexerd.core.store.sharedfrontier` holds them).
Used from the coordinator thread of the pass only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from indexerd.core.store.sharedfrontier import url_origin
from indexerd.sources.web.seeding import lost_with_the_process
from indexerd.sources.web.urls import host_key
from indexerd.sources.web.urlstate import UrlState

if TYPE_CHECKING:
    from indexerd.core.store.protocols import ClusterStateStore

__all__ = ["HostHandover"]


class HostHandover:
    """Moves one host's URL states of pass ``sched.pass_id`` into and out of node ``node``'s
    scheduler.

    Args:
        sched: the pass's :class:`~indexerd.sources.web.scheduler.Scheduler`.
        store: the pass's shared store connection.
        node: this node's name.
        out_of_scope: ``out_of_scope(state, reason)`` forgets a known URL the config no longer
            covers (as the :class:`~indexerd.sources.web.seeding.Seeder`'s).
    """

    def __init__(self, sched, store: ClusterStateStore, node: str,
                 out_of_scope: Callable[[UrlState, str], None]) -> None:
        self.sched = sched
        self.store = store
        self.node = node
        self.source = sched.src.name
        self.out_of_scope = out_of_scope

    def take_host(self, origin: str) -> None:
        """A host claimed: what the store knows of its URLs replaces what this node had in
        memory; what the node that held it before had queued in memory (it died, or stopped) is
        queued here, and so is a page of this pass it fetched but did not store."""
        s = self.sched
        s.table.drop_cached(lambda u: url_origin(u) == origin)
        # this pass's rows of the host (its waiting ones are read by take_waiting, right
        # after); the host's other rows are read back from the store if the pass asks for them
        for r in self.store.frontier_host_rows(self.source, origin, s.pass_id):
            st = UrlState.from_row(r)
            s.table.rows[st.url] = st
            s.seen.add(st.url)
            if lost_with_the_process(st, s.stored):
                st.state = "queued"
                s.table.put(st)
                s.counters.inc("web.resume.requeued")
            if st.state == "queued":
                self._queue(st, offered=False)

    def take_waiting(self, origin: str) -> None:
        """Take into this node's frontier what waits in the store for ``origin`` in this pass,
        as much as its window (``max_queued``) has room for (the rest at the next rounds); a
        known URL that a link offered but that is not due is left for its schedule."""
        s = self.sched
        room = max(0, s.cfg.max_queued - s.frontier.queued())
        if room == 0:
            self.store.frontier_pending_again(self.source, self.node, origin)
            return
        rows = self.store.frontier_take(self.source, origin, s.pass_id, room)
        if len(rows) == room:
            self.store.frontier_pending_again(self.source, self.node, origin)  # maybe more
        if rows:
            s.counters.inc("web.frontier.refilled", len(rows))
        for r in rows:
            st = UrlState.from_row(r)
            mine = s.table.rows.get(st.url)  # this pass's states of a host held here are all in memory
            if mine is not None and mine.pass_id == s.pass_id and mine.state != "spilled":
                s.table.put(mine)  # queued here already, or done: this node's row stands
                continue
            s.seen.add(st.url)
            st.state = "queued"  # in this node's memory now (and so in the store)
            s.table.rows[st.url] = st
            self._queue(st, offered=True)

    def put_back(self, origin: str) -> bool:
        """Take ``origin``'s waiting URLs out of this node's frontier, their states ``spilled``
        (written back by the next persist, for the host's next holder); False, and nothing
        changed, while a request to the host is in flight."""
        s = self.sched
        tasks = s.frontier.take_back(host_key(origin + "/"))
        if tasks is None:
            return False
        for t in tasks:
            st = s.table.get(t.url)
            if st is not None:
                st.state = "spilled"
                s.table.put(st)
            s.seen.discard(t.url)
        return True

    def _queue(self, st: UrlState, offered: bool) -> None:
        """Put ``st`` (a queued state of this pass, of a host this node holds) in the frontier,
        unless the config no longer covers it, or (``offered``: taken from the store, not from
        another node's memory or its lost work) it is a known URL a link offered that is not
        due (links to it wait for its schedule, as on one node)."""
        s = self.sched
        if st.via == "sitemapfile":
            s.put_sitemap(st.url, count=False)
            return
        reason = s.state_scope_reason(st)
        if reason is not None:
            self.out_of_scope(st, reason)
            return
        if offered and st.asked_before and st.via in ("link", "sitemap", "requisite") and not s.recrawl.due(st.due_at):
            st.state = "done"  # of this pass now, and in the seen set: links to it stop here
            s.table.put(st)
            s.counters.inc("web.recrawl.not-due")
            return
        s.queue(st)
