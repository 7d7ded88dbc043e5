"""Where a pass's URLs come from: the seeds, the URLs known from earlier passes, a resumed
pass's queue, and the sitemaps (named by robots.txt, else ``/sitemap.xml``).

A new pass starts from the seeds, then every URL requested before that is due (so a page whose
link disappeared is still re-checked, with a conditional GET, until it answers 404); a pass a
stop interrupted resumes where it was; ``ctl reindex URL`` queues just the URLs named.
Sitemaps are read for the seed hosts only, at most ``MAX_SITEMAP_FILES`` files and
``MAX_SITEMAP_URLS`` entries per file a pass.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import NamedTuple

from indexerd.core.dates import parse_date
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Task
from indexerd.sources.web.robots import RobotsRules
from indexerd.sources.web.scheduler import Scheduler
from indexerd.sources.web.sitemap import parse_sitemap
from indexerd.sources.web.urls import canonicalize, host_key, path_depth
from indexerd.sources.web.orphans import drop_orphans
from indexerd.sources.web.requisites import VIA as REQUISITE
from indexerd.sources.web.requisites import is_requisite
from indexerd.sources.web.urlstate import PassState, UrlState

log = logging.getLogger(__name__)

#: Entries read from one sitemap file (the protocol allows 50,000; the rest is not parsed).
MAX_SITEMAP_URLS = 10_000


class _Due(NamedTuple):
    """What queueing a known URL needs (a shared pass's start keeps no whole state)."""

    hops: int
    seq: int
    url: str
    seed_depth: int
    requisite: bool = False


def lost_with_the_process(st, stored) -> bool:
    """Whether the URL state ``st`` of the pass being resumed says its page was indexed while
    the store holds no document under its key: the crawl row was written back, the writer had
    not committed the document yet, and the process died (``kill -9``, power loss).  Such a page
    is asked again in the resumed pass instead of waiting for the next one.  ``stored(key)`` is
    the store's record or None."""
    return said_indexed(st) and stored(st.key) is None


def said_indexed(st: UrlState) -> bool:
    """Whether the crawl row ``st`` says its page was asked and indexed in its pass."""
    # "Verdict.INDEXED:" is how crawl rows written before this check spelt the verdict
    return st.state == "done" and (st.last_outcome or "").startswith(("indexed:", "Verdict.INDEXED:"))


class Seeder:
    """Fills one pass's :class:`~indexerd.sources.web.scheduler.Scheduler`.

    Args:
        sched: the pass's scheduler (its table loaded).
        out_of_scope: ``out_of_scope(state, reason)`` forgets a known URL the config no longer
            covers (and deletes its indexed copy).
        drop_orphan: ``drop_orphan(url)`` removes the file and document row of a page requisite
            no page needs any more (:mod:`indexerd.sources.web.orphans`; its crawl row is
            deleted here).
    """

    def __init__(self, sched: Scheduler, out_of_scope: Callable[[UrlState, str], None],
                 drop_orphan: Callable[[str], None] = lambda url: None) -> None:
        self.sched = sched
        self.src = sched.src
        self.cfg = sched.cfg
        self.out_of_scope = out_of_scope
        self.drop_orphan = drop_orphan
        self.sitemaps_asked: set[str] = set()  # seed hosts whose sitemaps were queued

    def start(self, state: PassState) -> None:
        """A new pass: seeds, then the URLs requested before that are due (re-checked
        conditionally), each through an indexed query, so the pass's first request waits for
        what it will do, not for every URL the source ever knew:

        - the rows the last pass queued and never asked (it was stopped) are forgotten;
        - the rows the last pass said it indexed are checked against the documents (a write
          lost to a failed commit or a database restart is asked again now, due or not);
        - the due rows (by ``due_at``; every asked row in a forced pass or with adaptive
          recrawl off) are queued, in discovery order (fewest hops, then seq);
        - only when the scope settings changed since the last pass is every known URL checked
          against them (:meth:`rescope`), the ones no longer covered forgotten;
        - the page requisites no page needs any more (due, or no longer referenced by a
          referrer since the last pass began) are dropped, not queued
          (:func:`~indexerd.sources.web.orphans.drop_orphans`); after a finished ``ctl reindex
          --source`` pass, the requisites known before references were kept are judged too."""
        s = self.sched
        interrupted = state.running
        s.pass_id = state.id + 1
        s.recrawl.pass_start = self.src.clock()
        s.table.drop_spilled(state.id)  # the last pass's overflow, if a stop left it
        if state.forced and not state.running and state.id:  # every page was parsed in it
            s.table.store.crawl_trust_requisite_references(self.src.name)
        for seed in self.cfg.seeds:
            url = canonicalize(seed)
            s.enqueue(url, hops=0, seed_depth=path_depth(url), via="seed")
        self.rescope()
        forgotten = s.table.store.crawl_forget_unasked(self.src.name, state.id)
        if forgotten:
            log.info("%s: forgot %d URLs the interrupted pass %d queued and never asked",
                     self.src.name, forgotten, state.id)
        if interrupted:
            self.requeue_orphans()
        # in a shared pass only what queueing needs, since the due states go to the shared
        # store and this node keeps none of them
        due: dict[str, UrlState | _Due] = {}
        start = s.table.due_states(before_pass=s.pass_id, pass_start=s.recrawl.pass_start,
                                   min_interval=s.recrawl.min_interval, all_due=s.recrawl.all_due())
        met: set[str] = set()
        for st in start.unstored:  # said indexed, no document: crawl_indexed_unstored
            met.add(st.url)
            self._start_one(st, True, due)
        for st in start.due:
            if st.url not in met:
                self._start_one(st, False, due)
        requisites = [url for url, one in due.items()
                      if (one.requisite if isinstance(one, _Due) else is_requisite(one))]
        for url in drop_orphans(s.table, requisites, self.drop_orphan, s.counters):
            due.pop(url, None)
        for one in sorted(due.values(), key=lambda st: (st.hops, st.seq)):
            if isinstance(one, UrlState):
                s.table.keep(one)
            requisite = one.requisite if isinstance(one, _Due) else is_requisite(one)
            s.enqueue(one.url, hops=one.hops, seed_depth=one.seed_depth,
                      via=REQUISITE if requisite else "recheck")
        s.persist(finished=False)

    def _start_one(self, st: UrlState, unstored: bool, due: dict) -> None:
        """A new pass meets the stored state ``st`` (asked before, due or ``unstored``): out
        of scope (forgotten), or added to ``due``.  ``unstored``: its row says its page was
        indexed and the store has no document for it (the write was lost: a failed commit, a
        database restart), so it is due now whatever its schedule says."""
        s = self.sched
        if st.pass_id >= s.pass_id or st.url in s.seen or s.table.removed(st.url):  # a seed; rescoped
            return
        if not st.asked_before:
            return
        reason = s.state_scope_reason(st)
        if reason is not None:
            self.out_of_scope(st, reason)
            return
        if unstored:  # queued as a recheck (whatever its schedule), without validators
            s.counters.inc("web.recheck.unstored")
        elif not s.recrawl.due(st.due_at):
            return
        due[st.url] = st if s.table.readable is None else _Due(st.hops, st.seq, st.url, st.seed_depth,
                                                               is_requisite(st))

    def rescope(self) -> None:
        """When the source's scope settings (seeds, domains, ports, restrict / include /
        exclude, path depth, hops) differ from those the last pass ran with, check every known
        URL against them (a chunk at a time) and forget the ones no longer covered, with their
        indexed copies; the new settings' fingerprint is written with the pass state.  A
        store from before the fingerprint is checked once."""
        s = self.sched
        print_ = self.src.scope.fingerprint()
        if s.table.scope_fingerprint() == print_:
            return
        checked = dropped = 0
        for chunk in s.table.stored_state_chunks():
            for st in chunk:
                if not st.asked_before or st.pass_id >= s.pass_id or st.url in s.seen:
                    continue
                reason = s.state_scope_reason(st)
                if reason is not None:
                    self.out_of_scope(st, reason)
                    dropped += 1
            checked += len(chunk)
            if checked % 100_000 < len(chunk):
                log.info("%s: the scope settings changed: %d known URLs checked, %d out of scope",
                         self.src.name, checked, dropped)
        s.table.set_scope_fingerprint(print_)
        log.info("%s: scope settings checked against %d known URLs: %d no longer covered, forgotten",
                 self.src.name, checked, dropped)

    def start_only(self, state: PassState) -> None:
        """``ctl reindex URL``: queue just the URLs named, within the current pass's id."""
        s = self.sched
        s.pass_id = state.id
        depth = {host_key(canonicalize(u)): path_depth(canonicalize(u)) for u in self.cfg.seeds}
        for url in s.only or ():
            st = s.table.get(url)
            hops, seed_depth = (st.hops, st.seed_depth) if st else (0, depth.get(host_key(url), path_depth(url)))
            s.enqueue(url, hops=hops, seed_depth=seed_depth, via="reindex", front=True)

    def resume(self, state: PassState) -> None:
        """Continue an interrupted pass: what it did stays done, what it queued is queued (the
        frontier's overflow stays on disk until the scheduler's ``refill`` takes it back); a
        forced pass (``ctl reindex --source``) stays forced."""
        s = self.sched
        s.pass_id = state.id
        s.recrawl.forced, s.recrawl.recheck = state.forced, state.recheck
        s.spill_left = True
        if state.started is not None:
            s.recrawl.pass_start = state.started
        last = requeued = 0
        queued: list[UrlState] = []  # this pass's queued states, in discovery order below
        for st in s.table.pass_states(s.pass_id):  # this pass's rows only, by index
            s.seen.add(st.url)
            last = max(last, st.seq)
            if lost_with_the_process(st, s.stored):
                st.state = "queued"
                s.table.put(st)
                requeued += 1
            if st.state == "queued":
                queued.append(st)
        for st in sorted(queued, key=lambda st: st.seq):
            if st.url not in s.table.rows:
                s.table.keep(st)
            if st.via == "sitemapfile":
                s.put_sitemap(st.url, count=False)
                continue
            reason = s.state_scope_reason(st)
            if reason is not None:  # queued by an older indexerd, or the config changed
                self.out_of_scope(st, reason)
                continue
            s.queue(st)
        s.seq = itertools.count(last + 1)
        if requeued:
            s.counters.inc("web.resume.requeued", requeued)
        self.requeue_orphans()
        log.info("%s: resuming crawl pass %d (%d URLs seen, %d queued%s)", self.src.name, s.pass_id,
                 len(s.seen), s.frontier.queued(),
                 f", {requeued} of them fetched before the interruption but not stored" if requeued else "")

    def requeue_orphans(self) -> None:
        """After an interrupted pass, and on a node joining a pass the cluster crawls together
        (a node of it may have died): queue the indexed pages no crawl row would ask again
        (:meth:`~indexerd.core.store.crawl.CrawlRows.crawl_orphan_keys`: a new page's document
        committed before its row was written, or a gone page whose deletion's commit was lost),
        so each is asked now, conditionally: a ``304`` keeps it and writes its row, a ``404``
        deletes it.  Without this a page the server deleted meanwhile stayed indexed for good
        (issue 29's kill -9 rounds)."""
        s = self.sched
        depth = {host_key(canonicalize(u)): path_depth(canonicalize(u)) for u in self.cfg.seeds}
        queued = 0
        for key in s.table.store.crawl_orphan_keys(self.src.name):
            if not key.startswith(("http://", "https://")) or key in s.seen:
                continue
            known = s.table.get(key)
            if known is not None and known.last_outcome == "gone":
                known.last_outcome = "orphan"  # asked again: no longer a confirmed gone page
                s.table.put(known)
            if s.enqueue(key, hops=known.hops if known else 1, seed_depth=known.seed_depth if known
                         else depth.get(host_key(key), path_depth(key)), via="recheck"):
                queued += 1
        if queued:
            s.counters.inc("web.resume.orphans", queued)
            log.info("%s: %d indexed pages no crawl row would ask again (an interrupted pass) "
                     "are asked now", self.src.name, queued)

    # -- sitemaps -------------------------------------------------------------------------
    def robots_known(self, host: str, rules: RobotsRules) -> None:
        """``host``'s robots.txt is known: queue its sitemaps (its ``Sitemap:`` lines, else
        ``/sitemap.xml``) if it is a seed host, once a pass, unless sitemaps are off."""
        if not self.cfg.sitemaps or self.sched.only is not None or host not in self.src.seed_hosts \
                or host in self.sitemaps_asked:
            return
        self.sitemaps_asked.add(host)
        for m in list(rules.sitemaps) or [host + "/sitemap.xml"]:
            try:
                url = canonicalize(m)
            except ValueError:
                continue
            if host_key(url) in self.src.seed_hosts:
                self.sched.put_sitemap(url)

    def sitemap_answer(self, task: Task, resp: Response) -> None:
        """Queue the pages (one hop from the host's seed) and child sitemaps of a sitemap file.

        A ``<lastmod>`` or ``<changefreq>`` is kept in the page's state; a ``<lastmod>`` later
        than the page's last check makes a page that is not due due now."""
        s = self.sched
        st = s.done(task, resp, "sitemap")
        if resp.error is not None or resp.status != 200:
            s.counters.inc("web.sitemap.unavailable")
            return
        try:
            pages, children = parse_sitemap(resp.body, max_entries=MAX_SITEMAP_URLS)
        except ValueError as e:
            s.counters.inc("web.sitemap.invalid")
            log.warning("%s: %s: not a usable sitemap: %s", self.src.name, task.url, e)
            return
        st.last_outcome = f"sitemap:{len(pages)}+{len(children)}"
        if max(len(pages), len(children)) >= MAX_SITEMAP_URLS:
            s.counters.inc("web.sitemap.truncated")  # the rest of the file is not read
        for child in children:
            try:
                url = canonicalize(child.loc)
            except ValueError:
                continue
            if host_key(url) in self.src.seed_hosts:
                s.put_sitemap(url)
        seed_depth = min(path_depth(canonicalize(u)) for u in self.cfg.seeds
                         if host_key(canonicalize(u)) == task.host)
        hops = 1
        for i, entry in enumerate(pages):
            if s.spill_full():
                s.counters.inc("web.drop.frontier-full", len(pages) - i)
                break
            try:
                url = canonicalize(entry.loc)
            except ValueError:
                continue
            reason = s.scope_reason(url, hops, seed_depth)
            if reason is not None:  # before any state is made: an out-of-scope entry leaves no trace
                s.counters.inc(f"web.drop.{reason}")
                continue
            if entry.lastmod or entry.changefreq:
                page = s.state(url)
                page.sitemap_lastmod = entry.lastmod or page.sitemap_lastmod
                page.changefreq = entry.changefreq or page.changefreq
            known = s.table.get(url)  # None: unknown, or another node's host in a shared pass
            if known is not None and s.deferred(known) and url not in s.seen \
                    and self._changed_since_checked(known, entry.lastmod):
                s.undefer(known)  # the sitemap says it changed: due now
                s.enqueue(url, hops=known.hops, seed_depth=known.seed_depth, via="recheck")
            elif s.enqueue(url, hops=hops, seed_depth=seed_depth, via="sitemap"):
                s.counters.inc("web.sitemap.urls")

    @staticmethod
    def _changed_since_checked(known: UrlState, lastmod: str | None) -> bool:
        """A sitemap ``<lastmod>`` later than the last check of the URL whose state is ``known``
        (both real times, UTC)."""
        changed, checked = parse_date(lastmod), known.checked_at
        return changed is not None and checked is not None and changed > checked
