"""The crawl scheduler: which URLs a pass asks, in which order, and what it remembers of each.

Like Scrapy's scheduler (``scrapy/core/scheduler.py``, https://github.com/scrapy/scrapy: a
duplicate filter in front of memory and disk queues), it owns the pass's **seen set** (a URL is
queued at most once per pass; in memory, only the URLs this pass queued: a URL known from an
earlier pass and not due is told from its state, :meth:`Scheduler.known`), the **frontier** (:class:`~indexerd.sources.web.frontier.Frontier`,
in memory up to ``max_queued`` URLs) and its overflow on disk (``spilled`` rows, taken back as the
frontier drains), and every URL's :class:`~indexerd.sources.web.urlstate.UrlState` through the
:class:`~indexerd.sources.web.crawltable.CrawlTable`.  One scope gate applies when a URL is
queued and again just before it is fetched.  Adaptive recrawl (:mod:`indexerd.sources.web.recrawl`)
decides which known URLs are due.  Used by the thread that runs the pass only (the frontier
itself is thread-safe).  In a pass the cluster crawls together, ``shared`` (a
:class:`~indexerd.sources.web.sharedfrontier.SharedFrontier`) takes the URLs of hosts other nodes
crawl, and brings this node the URLs queued for its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timezone

from indexerd.sources.web.crawltable import CrawlTable
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Frontier, Task
from indexerd.sources.web.links import LinkFilter
from indexerd.sources.web.mirror import PassMirror
from indexerd.sources.web.requisites import VIA as REQUISITE
from indexerd.sources.web.requisites import is_requisite
from indexerd.sources.web.recrawl import PassRecrawl
from indexerd.sources.web.responses import conditional_validators, request_method
from indexerd.sources.web.urls import host_key
from indexerd.sources.web.urlstate import PassState, UrlState, Via

UTC = timezone.utc

#: The frontier's overflow on disk, in windows of ``max_queued``: beyond, new URLs are dropped.
SPILL_WINDOWS = 10
#: Sitemap files fetched per pass (a sitemap index may name many).
MAX_SITEMAP_FILES = 50
#: How a URL queued whether or not adaptive recrawl would ask it: a seed (every pass starts
#: there), a URL ``ctl reindex`` names, and one found due (:meth:`Scheduler.due`).
ASKED_WHEN_DUE_OR_NOT = frozenset({"seed", "reindex", "recheck"})


class Scheduler:
    """The seen set, the frontier and the URL states of one pass of one web source.

    Args:
        src: the :class:`~indexerd.sources.web.source.WebCrawlSource` (config, scope, slots, robots).
        table: the source's crawl table (loaded by the caller).
        counters: the pass's named counters.
        stored: ``stored(key)`` -> the document's stored record or None (sees pending writes).
        mirror: the pass's mirror (validators are not sent for a page whose file it lost).
        forced: a ``ctl reindex`` pass: no validators, every known URL due.
        only: ``ctl reindex URL``: the URLs asked by name; links are stored, not followed.
        recheck: ``ctl crawl NAME --all``: every known URL due, asked with its validators.
    """

    def __init__(self, src, table: CrawlTable, counters, stored: Callable, mirror: PassMirror, *,
                 forced: bool, only: list[str] | None = None, recheck: bool = False) -> None:
        self.src = src
        self.cfg = cfg = src.cfg
        self.table = table
        self.counters = counters
        self.stored = stored
        self.mirror = mirror
        self.only = only
        self.frontier = Frontier(cfg.order, src.slots, src.robots, cfg.max_pages, gate=self._task_gate)
        self.links = LinkFilter(src.scope, counters, max_query_variants=cfg.max_query_variants,
                                max_numbered_variants=cfg.max_numbered_variants)
        self.seen: set[str] = set()  # URLs queued (or offered, spilled) in this pass: its work
        self.spilled = 0  # URLs this process spilled (or, in a shared pass, offered) in this pass
        self.spill_left = False  # spilled rows may wait in the store
        self.sitemap_files = 0
        self.seq = itertools.count()
        self.pass_id = 0
        self.recrawl = PassRecrawl(src.clock(), float(cfg.interval), float(cfg.max_recrawl_interval),
                                   forced=forced, recheck=recheck)
        self.shared = None  # a SharedFrontier in a pass the cluster crawls together

    # -- URL states -----------------------------------------------------------------------
    def state(self, url: str) -> UrlState:
        """The state of ``url`` (a new one in this pass if unknown), marked to be written."""
        st = self.table.get(url)
        if st is None and self.shared is not None and not self.shared.owns(url):
            st = self.shared.row(url)  # a redirect's origin on a host another node crawls
        if st is None:
            st = UrlState(url, pass_id=self.pass_id, seq=next(self.seq))
        return self.table.put(st)

    def done(self, task: Task, resp: Response | None, outcome: str) -> UrlState:
        """Record that ``task`` was answered (or skipped: ``resp`` None) with ``outcome``."""
        st = self.state(task.url)
        st.state, st.last_outcome, st.checked_at = "done", outcome, datetime.now(UTC)
        if resp is not None:
            st.last_status = resp.status if resp.status is not None else 0  # 0: no HTTP answer
        return st

    def forget(self, st: UrlState, reason: str) -> None:
        """A known URL the config no longer covers: its state is deleted (``web.drop.<reason>``);
        links to it are not counted again in this pass unless the drop depends on the path."""
        self.table.remove(st.url)
        self.links.forget_later(st.url, reason)
        self.counters.inc(f"web.drop.{reason}")

    # -- adaptive recrawl (:class:`~indexerd.sources.web.recrawl.PassRecrawl`) ----------------
    def deferred(self, st: UrlState | None) -> bool:
        """Whether ``st`` (a URL's state, or None) is that of a known URL this pass does not ask:
        requested in an earlier pass and not due in this one."""
        return st is not None and st.pass_id < self.pass_id and st.asked_before and not self.recrawl.due(st.due_at)

    def known(self, url: str) -> bool:
        """Whether ``url`` needs no queueing in this pass: in the seen set (queued, spilled or
        offered in this pass), waiting in the shared store for this pass (a pass the cluster
        crawls together), or :meth:`deferred`.  The seen set holds this pass's work only; a
        URL the source knew from earlier passes is told from its state, which the crawl table
        reads back when asked (:meth:`CrawlTable.prefetch` reads a page's links at once), so a
        pass's memory does not grow with every URL the source ever knew."""
        if url in self.seen:
            return True
        st = self.table.get(url)
        if st is not None and st.pass_id == self.pass_id and st.state == "spilled":
            return True  # offered by some node, for the holder of its host to take
        return self.deferred(st)

    def undefer(self, st: UrlState) -> None:
        """A known URL not due (:meth:`deferred`) turned out to be due now (its sitemap says it
        changed): its schedule says so (due at this pass's start), then it is queued."""
        st.due_at = self.recrawl.pass_start
        self.table.put(st)
        self.counters.inc("web.recrawl.sitemap-lastmod")

    def reschedule(self, st: UrlState, change: str) -> None:
        """Learn from one fetch of ``st``'s URL when to ask it again (``change``: recrawl's
        ``CHANGED``, ``UNCHANGED`` or ``FAILED``)."""
        s = self.recrawl.next(st.recrawl_seconds, change, st.changefreq, seed=st.via == "seed")
        st.recrawl_seconds, st.due_at, st.due_reason = s.interval_seconds, s.due_at, s.reason

    # -- the scope gate -------------------------------------------------------------------
    def scope_reason(self, url: str, hops: int, seed_depth: int, kind: str = "page") -> str | None:
        """The source's scope gate (:meth:`~indexerd.sources.web.scope.Scope.gate`)."""
        return self.src.scope.gate(url, hops, seed_depth, kind)

    def state_scope_reason(self, st: UrlState) -> str | None:
        """:meth:`scope_reason` of a known URL, a page requisite checked as one."""
        return self.scope_reason(st.url, st.hops, st.seed_depth,
                                 "requisite" if is_requisite(st) else "page")

    def _task_gate(self, task: Task) -> str | None:
        """:meth:`scope_reason` of a task the frontier is about to hand out (robots.txt is
        only asked for hosts of queued URLs, which passed the gate)."""
        if task.kind == "robots":
            return None
        return self.scope_reason(task.url, task.hops, task.seed_depth, task.kind)

    # -- queueing -------------------------------------------------------------------------
    def task_for(self, st: UrlState, front: bool = False) -> Task:
        """The request for ``st``'s URL: conditional when a copy is kept, HEAD first for what
        does not look like HTML (:mod:`indexerd.sources.web.responses`)."""
        etag, lm = conditional_validators(st, self.stored, forced=self.recrawl.forced,
                                          now=datetime.now(UTC), mirror_has=self.mirror.has)
        url = st.url
        if is_requisite(st):  # kept in the mirror whatever its type: asked with GET
            return Task(url=url, host=host_key(url), kind="requisite", hops=st.hops,
                        seed_depth=st.seed_depth, seq=st.seq, etag=etag, last_modified=lm,
                        front=front)
        return Task(url=url, host=host_key(url), hops=st.hops, seed_depth=st.seed_depth, seq=st.seq,
                    method=request_method(url, etag, lm), etag=etag, last_modified=lm, origin=st.origin,
                    redirects=st.redirects, front=front)

    def queue(self, st: UrlState) -> None:
        """Put the known ``st`` (a resumed pass's queued row) in the frontier as it is."""
        self.frontier.put(self.task_for(st))

    def retry(self, task: Task) -> None:
        """Ask ``task`` again (a 429 retry, the GET after a HEAD): it does not spend the budget twice."""
        self.frontier.refund()
        self.frontier.put(task)

    def _frontier_full(self) -> bool:
        """``max_queued`` URLs wait in memory already: a new one goes to the store (spilled),
        taken back by :meth:`refill` as the frontier drains."""
        return self.frontier.queued() >= self.cfg.max_queued

    def spill_full(self) -> bool:
        """The window and the store's overflow (``SPILL_WINDOWS`` windows) are full: a new URL is
        dropped and counted, to be found again later in the pass or from the next pass's pages
        (their stored links)."""
        return self.spilled >= SPILL_WINDOWS * self.cfg.max_queued and self._frontier_full()

    def enqueue(self, url: str, *, hops: int, seed_depth: int, via: Via, origin: str | None = None,
                redirects: int = 0, front: bool = False) -> bool:
        """Add ``url`` to the frontier unless it was seen in this pass (or, found by a link, a
        sitemap or a redirect, is :meth:`known`) or the scope gate drops it
        (counted ``web.drop.<reason>``); beyond ``max_queued`` a new URL found by a link or a
        sitemap waits on disk.  True when queued (or spilled)."""
        if url in self.seen or (via not in ASKED_WHEN_DUE_OR_NOT and via != REQUISITE
                                and self.known(url)):
            return False
        spill = via in ("link", "sitemap", REQUISITE) and self.shared is None and self._frontier_full() \
            and url not in self.table  # a shared pass keeps its hosts' URLs in memory; a store read last
        if spill and self.spilled >= SPILL_WINDOWS * self.cfg.max_queued:
            self.counters.inc("web.drop.frontier-full")
            return False
        known = self.table.get(url) if via in ASKED_WHEN_DUE_OR_NOT else None
        requisite = via == REQUISITE or (known is not None and is_requisite(known))
        if requisite:
            via = REQUISITE  # stays one wherever its row goes (another node's host, the spill)
        reason = self.scope_reason(url, hops, seed_depth, "requisite" if requisite else "page")
        if reason is not None:
            self.counters.inc(f"web.drop.{'requisite-' if requisite else ''}{reason}")
            return False
        offer = self.shared is not None and (not self.shared.owns(url) or self._frontier_full())
        if offer and via in ("link", "sitemap", REQUISITE) and self.spilled >= SPILL_WINDOWS * self.cfg.max_queued:
            # the same bound as a single node's overflow: a link farm fills neither this
            # process's seen set nor the shared store
            self.counters.inc("web.drop.frontier-full")
            return False
        self.seen.add(url)
        if offer and self.shared is not None:
            # another node's host, or the window is full: the URL waits in the shared store
            self.spilled += 1
            self.shared.offer(UrlState(url, pass_id=self.pass_id, hops=hops, seed_depth=seed_depth,
                                       seq=next(self.seq), via=via, origin=origin, redirects=redirects))
            return True
        if spill:  # a new URL beyond the window: on disk only, taken back by refill
            self.table.spill(UrlState(url, pass_id=self.pass_id, state="spilled", hops=hops,
                                      seed_depth=seed_depth, seq=next(self.seq), via=via))
            self.spilled += 1
            self.spill_left = True
            self.counters.inc("web.frontier.spilled")
            return True
        st = self.table.get(url) or UrlState(url)
        st.pass_id, st.state, st.hops, st.seed_depth = self.pass_id, "queued", hops, seed_depth
        st.seq, st.via, st.origin, st.redirects = next(self.seq), via, origin, redirects
        self.table.put(st)
        self.frontier.put(self.task_for(st, front=front))
        return True

    def put_sitemap(self, url: str, count: bool = True) -> None:
        """Queue the sitemap file ``url`` at the front (at most ``MAX_SITEMAP_FILES`` a pass;
        ``count=False``: a resumed pass's, already counted)."""
        reason = self.scope_reason(url, 0, 1, "sitemap")
        if reason is not None:
            self.counters.inc(f"web.drop.sitemap-{reason}")
            return
        if count:
            if self.known(url) or self.sitemap_files >= MAX_SITEMAP_FILES:
                return
            self.sitemap_files += 1
            self.seen.add(url)
            if self.shared is not None and not self.shared.owns(url):
                self.shared.offer(UrlState(url, pass_id=self.pass_id, seq=next(self.seq), via="sitemapfile"))
                return
            st = self.table.get(url) or UrlState(url)
            st.pass_id, st.state, st.seq, st.via = self.pass_id, "queued", next(self.seq), "sitemapfile"
            self.table.put(st)
        self.frontier.put(Task(url=url, host=host_key(url), kind="sitemap", front=True))

    def follow(self, links: list[str], task: Task, why: Via = "link") -> int:
        """Filter (:class:`~indexerd.sources.web.links.LinkFilter`) and enqueue the canonical
        outlinks of ``task``'s page; return how many of them are URLs never seen before
        (adaptive recrawl counts that as a change).  ``ctl reindex URL`` follows nothing."""
        if self.only is not None:
            return 0
        hops = task.hops + 1
        new = 0
        self.table.prefetch([link for link in links if link not in self.seen])
        for link in links:
            if self.known(link) or self.links.dropped_before(link):
                continue
            if self.spill_full():  # before the costlier checks: a page of 10,000 links
                self.counters.inc("web.drop.frontier-full")
                continue
            if not self.links.admit(link, hops=hops, seed_depth=task.seed_depth):
                continue
            unknown = link not in self.table
            if self.enqueue(link, hops=hops, seed_depth=task.seed_depth, via=why) and unknown:
                new += 1
        return new

    def follow_requisites(self, urls: list[str], task: Task) -> int:
        """Queue the page requisites ``urls`` of ``task``'s page or stylesheet
        (:mod:`indexerd.sources.web.requisites`): at its hop count (requisites spend no hop), each
        once a pass; one kept as a requisite before waits for its own next due time, a URL known
        as something else (an image also linked with ``<a>``) is asked as a requisite now.  The
        count of URLs queued.  ``ctl reindex URL`` follows nothing."""
        if self.only is not None or not urls:
            return 0
        self.table.prefetch([url for url in urls if url not in self.seen])
        queued = 0
        for url in urls:
            if url in self.seen:
                continue
            st = self.table.get(url)
            if st is not None and is_requisite(st) and self.deferred(st):
                continue
            if self.enqueue(url, hops=task.hops, seed_depth=task.seed_depth, via=REQUISITE):
                queued += 1
        if queued:
            self.counters.inc("web.requisite.queued", queued)
        return queued

    def refill(self) -> None:
        """Take spilled URLs back from the store once the in-memory frontier is half empty.

        Called while the task being processed is still outstanding, so the workers never see
        an empty frontier while URLs wait on disk.  In a shared pass: a round with the cluster
        (:meth:`SharedFrontier.tick`) instead."""
        if self.shared is not None:
            self.shared.tick()
            return
        if not self.spill_left or self.frontier.queued() > self.cfg.max_queued // 2:
            return
        states = self.table.take_spilled(self.pass_id, max(1, self.cfg.max_queued // 2))
        if not states:
            self.spill_left = False
            return
        for st in states:
            if st.url in self.table:  # queued again in memory since (a resumed pass)
                continue
            st.state = "queued"
            self.table.put(st)
            self.frontier.put(self.task_for(st))
        self.counters.inc("web.frontier.refilled", len(states))
        self.persist(finished=False)  # before the next query: these rows are no longer spilled

    # -- persistence ----------------------------------------------------------------------
    def pass_state(self, finished: bool = False) -> PassState | None:
        """The pass's resume point (``ctl reindex URL``: None, the stored one is left as it is)."""
        if self.only is not None:
            return None
        return PassState(id=self.pass_id, running=not finished, started=self.recrawl.pass_start, forced=self.recrawl.forced,
                         recheck=self.recrawl.recheck)

    def persist_maybe(self) -> None:
        self.table.write_maybe(self.pass_state())

    def persist(self, finished: bool) -> None:
        if self.shared is not None:
            self.shared.flush()  # the URLs queued for other nodes first: the pass state may say running
        self.table.write(self.pass_state(finished), finished=finished)
