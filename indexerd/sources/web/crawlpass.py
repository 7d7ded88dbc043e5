"""One pass of a web source: the worker loop that ties the crawl's parts together.

Data flow (LCWA: parallel fetchers over one shared frontier and a result pool; Scrapy's engine
between its scheduler and its downloader):

* the :class:`~indexerd.sources.web.scheduler.Scheduler` holds the seen set, the frontier and
  every URL's state; the :class:`~indexerd.sources.web.seeding.Seeder` fills it (seeds, known
  URLs, a resumed pass, sitemaps);
* a small pool of worker threads (:class:`~indexerd.sources.web.workers.FetchWorkers`) takes from
  the frontier, a host only when its politeness slot is free and its robots.txt is known, and
  only talks HTTP;
* the thread that runs the pass (the **coordinator**, :class:`CrawlPass`) takes the workers'
  results in order of arrival and does everything else: robots.txt verdicts, sitemaps, and the
  page answers (:class:`~indexerd.sources.web.answers.Answers`: redirects, the document
  pipeline, links, the mirror), writing the URL states back as it goes so that a daemon stopped
  mid-crawl resumes the same pass without fetching again what it already did.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from indexerd.core.errors import IndexerdError
from indexerd.core.counts import PassCounts
from indexerd.core.outcome import Verdict
from indexerd.pipeline.stages import Pipeline
from indexerd.sources.web.answers import Answers
from indexerd.sources.web.crawltable import CrawlTable
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Task
from indexerd.sources.web.mirror import PassMirror
from indexerd.sources.web.scheduler import Scheduler
from indexerd.core.store import PgStore
from indexerd.core.store.cluster import SourceLock, lock_key
from indexerd.sources.web.seeding import Seeder
from indexerd.sources.web.sharedfrontier import CLUSTER, SharedFrontier
from indexerd.sources.web.workers import FetchWorkers

log = logging.getLogger(__name__)

#: Seconds a stopped pass waits for its workers (their requests are cut at once by the stop).
WORKER_STOP_SECONDS = 1.0


class CrawlPass:
    """The coordinator of one pass (or of a ``ctl reindex URL``: ``only``).

    Args:
        src: the :class:`~indexerd.sources.web.source.WebCrawlSource`.
        pipeline: the document pipeline; counters go to ``pipeline.counters``.
        counts: the pass's counts.
        progress: an object with ``tick_crawl(done_pages, queued)``, or None.
        forced: send no validators and re-index every page fetched.
        cancel: the stop Event, or None.
        only: the canonical URLs to fetch instead of a pass (nothing followed, the pass state kept).
        recheck: every known page is due in this pass (asked with its validators).
    """

    def __init__(self, src, pipeline: Pipeline, counts: PassCounts, progress, forced: bool,
                 cancel: threading.Event | None, only: list[str] | None = None, recheck: bool = False) -> None:
        self.src = src
        self.cfg = src.cfg
        self.pipeline = pipeline
        self.counts = counts
        self.progress = progress
        self.cancel = cancel
        self.only = only
        self.counters = pipeline.counters
        self.results: queue.Queue = queue.Queue()
        self.table = CrawlTable(pipeline.store, src.name)
        # a file removed needs its page requisites no more (indexerd.sources.web.orphans)
        self.mirror = PassMirror(src.mirror, src.name, self.counters,
                                 on_remove=lambda url: self.table.set_requisites(url, None))
        self.sched = Scheduler(src, self.table, self.counters, pipeline.stored, self.mirror, forced=forced,
                               only=only, recheck=recheck)
        self.answers = Answers(self.sched, pipeline, counts, self.mirror)
        self.seeder = Seeder(self.sched, self.answers.out_of_scope, self.answers.drop_orphan)
        self.done_pages = 0
        self.unreachable: set[str] = set()  # hosts whose robots.txt could not be read this pass

    def run(self) -> None:
        """Seed (or resume), run the workers until the frontier is exhausted or the stop, and
        write everything back.

        Raises:
            ConfigError: credentials cannot be read.
            StoreError: the state store cannot be written.
        """
        fetcher = self.src.fetcher()
        if CLUSTER.node is not None and self.only is None:
            if not self._begin_shared():
                return
        else:
            state = self.table.load()
            if self.only is not None:
                self.seeder.start_only(state)
            elif state.running and not self.sched.recrawl.forced and not self.sched.recrawl.recheck:
                self.seeder.resume(state)
            else:
                self.seeder.start(state)
        frontier = self.sched.frontier
        crew = FetchWorkers(self.src, frontier, self.results, fetcher, self.counters, self.cancel)
        workers = [threading.Thread(target=crew.run, daemon=True, name=f"crawl:{self.src.name}:{i}")
                   for i in range(self.cfg.workers)]
        for w in workers:
            w.start()
        finished = False
        try:
            self._coordinate(len(workers))
            finished = not self._stopped() and not (self.sched.shared is not None and self.sched.shared.left)
            seeds = self.src.seed_hosts
            if finished and seeds and seeds <= self.unreachable:
                self.counts.failed = f"no seed host answered: {', '.join(sorted(self.unreachable))}"
        finally:
            self._stop(workers)
            self.pipeline.flush()
            self.answers.convert_mirrored_pages()  # what the pass kept is known now
            self.sched.persist(finished=finished)
            if self.sched.shared is not None:
                self.sched.shared.leave(finished)
        if self.sched.shared is not None and self.sched.shared.left:
            self.counts.left_to_others = True
            (log.info if frontier.requests else log.debug)(
                "%s: node %s leaves crawl pass %d to the nodes still working, after %d requests",
                self.src.name, CLUSTER.node, self.sched.pass_id, frontier.requests)
            return
        log.info("%s: crawl %s after %d requests (%d still queued)", self.src.name,
                 "finished" if finished else "interrupted", frontier.requests, frontier.queued())
        self.mirror.report()

    def _begin_shared(self) -> bool:
        """In a cluster: join the pass the nodes crawl together, or begin one when this node
        holds the source's lock (taken by the claim, :func:`~indexerd.sources.claims.claim_pass`);
        False when there is nothing to do (the pass this node was to join ended meanwhile: the
        pass counts as left to the others, so the daemon asks the claim again shortly)."""
        s = self.sched
        store = self.pipeline.store
        assert isinstance(store, PgStore) and CLUSTER.node is not None, "a cluster: PostgreSQL, a node name"
        state = self.table.load_pass_state()
        held = lock_key("source", self.src.name, store.address.schema) in SourceLock.held_here
        if not state.running and not held:
            # the claim found a pass running and took no lock; it ended since: that pass is
            # done, and whether another is due is the claim's to say (asked again shortly)
            log.debug("%s: the crawl pass node %s was to join has ended", self.src.name, CLUSTER.node)
            self.counts.left_to_others = True
            return False
        shared = SharedFrontier(s, store, CLUSTER.node, self.answers.out_of_scope,
                                self.pipeline.write_pending)
        # this node's rows are those of the hosts it claims: this pass's in memory, the others
        # (not due) read back when asked
        self.table.share(shared.owns)
        if state.running:
            s.pass_id, s.recrawl.forced, s.recrawl.recheck = state.id, state.forced, state.recheck
            if state.started is not None:
                s.recrawl.pass_start = state.started
            log.info("%s: node %s joins crawl pass %d", self.src.name, CLUSTER.node, s.pass_id)
            # a node of it may have died with pages indexed that no crawl row asks again: the
            # resume's reconcile, by whoever joins (each such page is queued once per pass,
            # whichever nodes offer it; the cost is one query over the source's documents)
            self.seeder.requeue_orphans()
        else:
            store.frontier_reset(self.src.name)
            self.seeder.start(state)   # every URL goes to the shared store: no host is ours yet
            self.table.rows.clear()    # a host's rows are read again when it is claimed
            log.info("%s: node %s began crawl pass %d for the cluster", self.src.name, CLUSTER.node, s.pass_id)
        s.frontier.hold()
        shared.tick(now=True)
        return True

    def _stopped(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _coordinate(self, running: int) -> None:
        """Take results until every worker has said it is gone (``(None, None)``)."""
        while running:
            try:
                task, resp = self.results.get(timeout=0.5)
            except queue.Empty:
                self.sched.refill()  # a shared pass: a round with the cluster
                self.sched.persist_maybe()
                continue
            if task is None:
                running -= 1
                continue
            try:
                self._process(task, resp)
                self.sched.refill()
            except IndexerdError:
                raise
            except Exception:  # a bug on one page must not stop the crawl
                log.exception("%s: processing %s failed", self.src.name, task.url)
                self.counters.inc("error.internal")
            finally:
                self.sched.frontier.finish(task)
            self.sched.persist_maybe()

    def _stop(self, workers: list[threading.Thread]) -> None:
        """Stop the frontier, wait for the workers, and process the results they still gave."""
        self.sched.frontier.stop()
        # a stop cuts every request within 0.05 s (Fetcher's cancel); a worker stuck past
        # that (a DNS lookup) is left behind: its URL stays queued for the resume
        join_by = time.monotonic() + (WORKER_STOP_SECONDS if self._stopped() else float(self.cfg.timeout) + 5)
        for w in workers:
            w.join(timeout=max(0.0, join_by - time.monotonic()))
        while not self.results.empty():  # results of requests made before the stop
            task, resp = self.results.get_nowait()
            if task is None:
                continue
            try:
                self._process(task, resp)
            except Exception:
                log.exception("%s: processing %s failed", self.src.name, task.url)

    def _process(self, task: Task, resp: Response | None) -> None:
        """Handle one result, every write it makes carrying the claim its host was held under
        when the request was handed out (:attr:`Task.fence`) in a pass the cluster crawls
        together (the store refuses them once the host changed hands:
        :mod:`indexerd.sources.web.sharedfrontier`); an answer to a request made under a claim
        this node no longer holds with that token (lost, or claimed again since) writes
        nothing."""
        shared = self.sched.shared
        self.pipeline.fence = task.fence if shared is not None else None
        if shared is not None and task.fence is not None and shared.claims.answered_too_late(task.fence):
            return  # asked under a claim the host has changed hands since: the next holder's
        try:
            self._process_result(task, resp)
        finally:
            self.pipeline.fence = None

    def _process_result(self, task: Task, resp: Response | None) -> None:
        if resp is not None and resp.error == "cancelled":
            # the stop cut the request: nothing was learnt, the URL stays queued for the resume
            self.counters.inc("web.cancelled")
            return
        if resp is not None and resp.error == "paused":
            # this process was not running at the deadline (SIGSTOP, a stall): not the site's
            # timeout; asked again while the host is still this node's (a robots.txt is asked
            # again by the frontier, its verdict not stored)
            self.counters.inc("web.paused")
            log.info("%s: %s: %s", self.src.name, task.url, resp.detail)
            shared = self.sched.shared
            if task.kind != "robots" and (shared is None or shared.owns(task.url)):
                self.sched.retry(task)
            return
        if resp is not None and resp.error == "invalid-url" and task.kind != "robots":
            self.sched.done(task, resp, "invalid-url")
            self.counters.inc("web.drop.invalid")
            return
        shared = self.sched.shared
        if shared is not None and resp is not None and task.kind != "robots" and task.skip is None \
                and resp.method == "GET":
            shared.fetched(task.url, answered=resp.status is not None)  # the cluster pass's counts
        if resp is not None and resp.status is not None:   # /metrics: fetches by status, bytes
            self.counters.inc(f"web.fetch.{resp.status}")
            if resp.body:
                self.counters.inc("web.bytes", len(resp.body))
        if task.kind == "robots":
            self._robots_answer(task, resp)
        elif task.skip is not None:
            self._skipped(task)
        elif resp is None:  # a page task always has a response (a worker's failure is one)
            log.error("%s: %s: no response to process", self.src.name, task.url)
            self.counters.inc("error.internal")
        elif task.kind == "sitemap":
            self.seeder.sitemap_answer(task, resp)
        else:
            self.done_pages += 1
            if self.progress is not None and hasattr(self.progress, "tick_crawl"):
                self.progress.tick_crawl(self.done_pages, self.sched.frontier.queued())
            self.answers.handle(task, resp)

    def _robots_answer(self, task: Task, resp: Response | None) -> None:
        rules = self.src.robots.get(task.host)
        if rules is None:  # the worker failed before storing them
            resp = resp or Response(url=task.url, method="GET", status=None, headers={}, body=b"",
                                    elapsed=0.0, error="internal")
            rules = self.src.robots.put_response(task.host, resp)
        self.counters.inc(f"web.robots.{rules.status}")
        if rules.status == "unreachable":
            why = (resp.error or f"HTTP {resp.status}") if resp is not None else rules.detail
            self._host_unreachable(task.host, why or "no response")
        self.seeder.robots_known(task.host, rules)

    def _host_unreachable(self, host: str, why: str) -> None:
        """``host``'s robots.txt could not be read (RFC 9309 §2.3.1.4: nothing is fetched from
        it): the pass fails for this host -- in the counts, not only in the log -- once per pass,
        whether the verdict was made now or is the cached one (``UNREACHABLE_TTL``)."""
        if host in self.unreachable:
            return
        self.unreachable.add(host)
        self.counts.fail(f"{host}/robots.txt unreachable ({why}); nothing is fetched from {host} this pass")
        self.counters.inc("error.robots-unreachable")
        log.warning("%s: %s/robots.txt unreachable (%s); nothing is fetched from %s this pass",
                    self.src.name, host, why, host)

    def _skipped(self, task: Task) -> None:
        """robots.txt forbids the URL, or could not be read, or its host is down this pass, or
        the scope gate dropped it just before the fetch."""
        if task.skip == "robots-unreachable":
            rules = self.src.robots.get(task.host)
            self._host_unreachable(task.host, f"{rules.detail if rules else 'no response'}, "
                                              "the verdict cached from an earlier attempt")
        if task.skip is not None and task.skip not in ("robots", "robots-unreachable", "host-down"):
            st = self.table.get(task.url)
            if st is not None:
                self.answers.out_of_scope(st, task.skip)
            else:
                self.counters.inc(f"web.drop.{task.skip}")
            return
        self.counters.inc(f"web.drop.{task.skip}")
        st = self.sched.done(task, None, task.skip or "skipped")
        if task.kind == "sitemap":
            return
        if self.only is not None:  # asked for by name (ctl reindex URL): say it was not fetched
            self.counts.record(Verdict.SKIPPED)
        if task.skip == "robots":
            self.answers.retire(st.key, "robots.txt disallows it", task.url)
            st.last_outcome = "gone"
            st.last_status = None  # never requested: not re-checked unless linked again
