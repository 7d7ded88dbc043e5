"""The web source: a polite, incremental crawl of one site per ``[[sources.web]]`` table.

Data flow of one pass (LCWA: parallel fetchers over one shared frontier and a result pool):

* the **frontier** (:class:`Frontier`) holds the URLs still to fetch, one queue per host, in
  breadth-first (hops, discovery order) or depth-first order.  A small pool of worker threads
  takes from it; a host is handed out only when its politeness slot is free
  (:data:`~indexerd.sources.web.politeness.HOST_SLOTS`, shared by every source of the process) and its
  robots.txt is known.  Workers only talk HTTP.
* the thread that runs the pass (the **coordinator**) takes the workers' results in order of
  arrival and does everything else: robots.txt and sitemaps, redirects, the document pipeline
  (extract, date, decide, hand to the writer), links, scope and traps, the mirror, and the
  **seen set** and frontier kept in the state store's ``crawl`` table, so that a daemon stopped
  mid-crawl resumes the same pass without fetching again what it already did.

A new pass starts from the seeds, the sitemaps, and every URL requested before (so a page whose
link disappeared is still re-checked, with a conditional GET, until it answers 404).  What is
deleted: a confirmed 404/410 (after ``gone_after`` answers in a row), a page robots.txt now
disallows, a page now out of scope, a page that turned ``noindex``, and the old key after a
permanent redirect.  Nothing else: 5xx, timeouts, other 4xx and pages not reached keep their
indexed copy.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import posixpath
import queue
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from urllib.parse import urljoin, urlsplit

from indexerd.config import SourcePolicy
from indexerd.config import WebSource as WebSourceConfig
from indexerd.core.dates import MetaMap, check_plausible, parse_date
from indexerd.core.decide import DecideSettings
from indexerd.sources.web.duplicates import DuplicateFinder
from indexerd.core.errors import ConfigError, IndexerdError, SkipDocument
from indexerd.extract import extract, guess_media_type, parse_refresh
from indexerd.sources.web.workers import FetchWorkers
from indexerd.sources.web.fetch import Fetcher, Response
from indexerd.sources.web.frontier import Frontier, Task
from indexerd.core.pipeline import Fetched, PageLinks, PassCounts, Pipeline, Policy, Verdict
from indexerd.sources.web.politeness import HOST_SLOTS, HostSlots, PolitenessSettings
from indexerd.sources.web.recrawl import CHANGED, FAILED, UNCHANGED, is_due, next_schedule
from indexerd.sources.web.robots import RobotsCache
from indexerd.sources.web.crawltable import CrawlTable
from indexerd.sources.web.traps import PatternGuard
from indexerd.sources.web.urlstate import PassState, UrlState
from indexerd.sources.web.urls import QueryVariants, Scope, canonicalize, host_key, path_depth, trap_reason

log = logging.getLogger(__name__)
UTC = timezone.utc

#: Redirect hops followed from one URL before it counts as a ``redirect-loop``.
MAX_REDIRECTS = 10
#: Seconds a stopped pass waits for its workers (their requests are cut at once by the stop).
WORKER_STOP_SECONDS = 1.0
#: 429 / 503 answers after which a URL is given up for this pass.
MAX_RETRY_AFTER_ATTEMPTS = 3
#: Consecutive failures of one host after which its remaining URLs wait for the next pass.
HOST_FAILURE_LIMIT = 5
#: Outlinks kept per page (the rest are dropped and counted: a page of 100,000 links is a trap).
MAX_LINKS_PER_PAGE = 10_000
#: Sitemap files fetched per pass (a sitemap index may name many).
MAX_SITEMAP_FILES = 50
#: Entries read from one sitemap file (the protocol allows 50,000; the rest is not parsed).
MAX_SITEMAP_URLS = 10_000
#: The frontier's overflow on disk, in windows of ``max_queued``: beyond, new URLs are dropped.
SPILL_WINDOWS = 10
#: Dropped URLs remembered per pass so each is counted once (beyond: counted again when met again).
MAX_DROPPED_REMEMBERED = 100_000
#: Skip reasons that depend only on the bytes: a page skipped for one of them is asked with a
#: conditional GET next time (a 304 keeps the verdict) instead of being downloaded again.
#: ``too-large`` is not one: raising ``max_size`` must fetch it again.
SKIPS_BY_CONTENT = frozenset({"binary", "unsupported-type", "empty", "noindex"})
#: Path extensions that are (or produce) HTML: fetched with GET straight away.  Any other
#: extension is asked with HEAD first (LCWA), and fetched only if its type is indexed.
HTML_EXTENSIONS = frozenset({"", ".html", ".htm", ".xhtml", ".shtml", ".php", ".asp", ".aspx",
                             ".jsp", ".cgi", ".pl", ".txt", ".md"})


def _header_tokens(values: str | None, token: str = "indexerd") -> set[str]:
    """``X-Robots-Tag: noindex, nofollow`` -> {'noindex', 'nofollow'}.

    A directive may be scoped to a user agent (``otherbot: noindex, nofollow``): the scope holds
    for the directives that follow until the next ``agent:`` prefix (Google's reading of the
    header); only unscoped directives and those for ``token`` apply.  ``none`` means both.
    """
    out: set[str] = set()
    if not values:
        return out
    agent: str | None = None
    for part in values.split(","):
        part = part.strip().lower()
        head, sep, rest = part.partition(":")
        if sep and head.strip() not in ("unavailable_after", "max-snippet", "max-image-preview",
                                        "max-video-preview"):
            agent, part = head.strip(), rest.strip()
        if agent is None or agent == token.lower():
            out.add(part)
    if "none" in out:
        out |= {"noindex", "nofollow"}
    return out


@functools.lru_cache(maxsize=65536)
def _canonical_link(url: str, encoding: str | None = None) -> str:
    """:func:`canonicalize` (query in the page's ``encoding``), memoised: a site's navigation
    links repeat on every page, and w3lib's canonicalisation was half the time of a first crawl
    (measured on the Python docs: 104,000 links on 528 pages)."""
    return canonicalize(url, encoding)


def _extension(url: str) -> str:
    return posixpath.splitext(urlsplit(url).path)[1].lower()


def _utc_now() -> datetime:
    return datetime.now(UTC)


class WebSource:
    """One ``[[sources.web]]`` source (see the module docstring for a pass).

    Args:
        cfg: the config table.
        policy: effective per-source settings (max size, dates, refresh time).
        meta_map: the Verity meta map for page dates.
        slots: politeness slots (tests may pass their own; default the process-wide one).
        clock: the time adaptive recrawl schedules by (aware UTC; a benchmark may simulate
            passes an ``interval`` apart).
    """

    kind = "web"

    def __init__(self, cfg: WebSourceConfig, policy: SourcePolicy, meta_map: MetaMap,
                 slots: HostSlots = HOST_SLOTS, clock=_utc_now) -> None:
        self.cfg = cfg
        self.clock = clock
        self.name = cfg.name
        self.root = None
        self.max_size = policy.max_size_bytes
        self.slots = slots
        self.scope = Scope(list(cfg.seeds), allowed_domains=cfg.allowed_domains,
                           allowed_ports=cfg.allowed_ports, restrict=cfg.restrict,
                           include=cfg.include, exclude=cfg.exclude, path_depth=cfg.path_depth,
                           max_hops=cfg.max_hops)
        p = cfg.politeness
        self.politeness = PolitenessSettings(
            min_delay=float(p.min_delay), good_guy_factor=float(p.good_guy_factor),
            max_wait=float(p.max_wait), max_backoff=float(p.max_backoff),
            max_retry_after=float(p.max_retry_after))
        self.max_crawl_delay = float(p.max_crawl_delay)
        self.token = cfg.user_agent.split("/")[0].split()[0]
        self.robots = RobotsCache(token=self.token)
        self.pipeline_policy = Policy(
            meta_map=meta_map, date_order=policy.date_sources, max_bytes=policy.max_size_bytes,
            settings=DecideSettings(refresh_time_seconds=policy.refresh_time_seconds,
                                    strict_dates=policy.strict_dates))
        self.mirror = None
        if cfg.mirror_dir:
            from indexerd.sources.web.mirror import Mirror

            self.mirror = Mirror(os.path.expanduser(cfg.mirror_dir))
        self._fetcher: Fetcher | None = None

    # -- plumbing -------------------------------------------------------------------------
    def _password(self) -> str:
        a = self.cfg.auth
        if a.password_env:
            value = os.environ.get(a.password_env)
            if value is None:
                raise ConfigError(f"sources.web {self.name}: auth.password_env: environment variable "
                                  f"{a.password_env} is not set")
            return value
        try:
            with open(os.path.expanduser(a.password_file), encoding="utf-8") as fh:
                return fh.read().rstrip("\r\n")
        except OSError as e:
            raise ConfigError(f"sources.web {self.name}: auth.password_file: cannot read "
                              f"{a.password_file}: {e.strerror}") from None

    def fetcher(self) -> Fetcher:
        """The source's HTTP client (created on first use; credentials read then)."""
        if self._fetcher is None:
            auth = (self.cfg.auth.username, self._password()) if self.cfg.auth else None
            hosts = frozenset(host_key(canonicalize(s)) for s in self.cfg.seeds)
            self._fetcher = Fetcher(self.cfg.user_agent, timeout=float(self.cfg.timeout), auth=auth,
                                    auth_hosts=hosts)
        return self._fetcher

    def close(self) -> None:
        if self._fetcher is not None:
            f, self._fetcher = self._fetcher, None
            f.close()

    def contains(self, path: str) -> bool:  # the daemon asks every source about changed paths
        return False

    def handle_path(self, path, pipeline, counts, forced=False):  # pragma: no cover - not a tree
        raise ConfigError(f"{self.name} is a web source; give a URL's source name, not a path")

    # -- one pass -------------------------------------------------------------------------
    def run_pass(self, pipeline: Pipeline, counts: PassCounts, *, progress=None, forced: bool = False,
                 start: str | None = None, cancel: threading.Event | None = None) -> None:
        """Crawl the site once (or resume the pass a stop interrupted).

        ``forced`` (``ctl reindex``) sends no validators and re-indexes every page fetched.
        Per-reason counters go to ``pipeline.counters`` (``web.*``, ``skip.*``, ``error.*``).

        Raises:
            ConfigError: credentials cannot be read.
            StoreError: the state store cannot be written.
        """
        _Pass(self, pipeline, counts, progress, forced, cancel).run()

    def owns(self, url: str) -> bool:
        """True when the canonical ``url`` is in this source's scope as a page one hop from a
        seed of its host (what ``ctl reindex URL`` may fetch for a URL it has no row for)."""
        seeds = [canonicalize(s) for s in self.cfg.seeds]
        depth = next((path_depth(s) for s in seeds if host_key(s) == host_key(url)), 1)
        hops = 1 if self.cfg.max_hops is None else min(1, self.cfg.max_hops)
        return self.scope.check(url, hops=hops, seed_depth=depth) is None

    def refetch(self, urls: list[str], pipeline: Pipeline, counts: PassCounts, *,
                cancel: threading.Event | None = None) -> None:
        """``ctl reindex URL``: fetch these canonical URLs now and index them whatever the
        decision would say, without crawling the site.

        Each URL gets one unconditional GET (no validators; a URL that does not look like HTML
        is asked with HEAD first, as in a pass) through robots.txt and the host's politeness
        slot, shared with any running pass; a redirect is followed (in scope), links are stored
        but not followed, no sitemap is read, and the site's pass state (resume point, pass id)
        is left as it is.  A 404/410 counts towards ``gone_after`` as in a pass.

        Raises:
            ConfigError: credentials cannot be read.
            StoreError: the state store cannot be written.
        """
        _Pass(self, pipeline, counts, None, True, cancel, only=list(urls)).run()


class _Pass:
    """The coordinator of one pass: owns the rows, the seen set and the pipeline calls."""

    def __init__(self, src: WebSource, pipeline: Pipeline, counts: PassCounts, progress, forced: bool,
                 cancel: threading.Event | None, only: list[str] | None = None) -> None:
        self.src = src
        self.only = only  # ``ctl reindex URL``: fetch just these, follow nothing, keep the pass state
        self.cfg = src.cfg
        self.pipeline = pipeline
        self.store = pipeline.store
        self.counts = counts
        self.progress = progress
        self.forced = forced
        self.cancel = cancel
        self.counters = pipeline.counters
        self.results: queue.Queue = queue.Queue()
        self.frontier = Frontier(self.cfg.order, src.slots, src.robots, self.cfg.max_pages, gate=self._task_gate)
        self.table = CrawlTable(self.store, src.name)
        self.rows = self.table.rows
        self.seen: set[str] = set()
        self.dropped: set[str] = set()
        self.sitemaps_asked: set[str] = set()
        self.sitemap_files = 0
        self.query_variants = QueryVariants(self.cfg.max_query_variants)
        self.patterns = PatternGuard(self.cfg.max_numbered_variants, self.cfg.max_query_variants)
        self.spilled = 0  # URLs this process spilled in this pass
        self.spill_left = False  # spilled rows may wait in the store
        self.seq = itertools.count()
        self.pass_id = 0
        self.done_pages = 0
        self.seed_hosts = {host_key(canonicalize(s)) for s in self.cfg.seeds}
        self.duplicates = DuplicateFinder(src.name, pipeline)
        self.pass_start = src.clock()  # adaptive recrawl schedules from here (a resume: its start)
        self.min_interval = float(self.cfg.interval)
        self.max_interval = float(self.cfg.max_recrawl_interval)
        self.not_due: set[str] = set()  # known URLs this pass does not ask (in ``seen``)
        self.unreachable: set[str] = set()  # hosts whose robots.txt could not be read this pass
        self.mirror_failures = 0  # mirror writes and removals that failed in this pass

    # -- setup and teardown ---------------------------------------------------------------
    def run(self) -> None:
        fetcher = self.src.fetcher()
        state = self.table.load()
        self.rows = self.table.rows
        if self.only is not None:
            self._start_only(state)
        elif state.running and not self.forced:
            self._resume(state)
        else:
            self._start(state)
        crew = FetchWorkers(self.src, self.frontier, self.results, fetcher, self.counters, self.cancel)
        workers = [threading.Thread(target=crew.run, daemon=True, name=f"crawl:{self.src.name}:{i}")
                   for i in range(self.cfg.workers)]
        for w in workers:
            w.start()
        finished = False
        running = len(workers)
        try:
            while running:
                try:
                    task, resp = self.results.get(timeout=0.5)
                except queue.Empty:
                    self._persist_maybe()
                    continue
                if task is None:
                    running -= 1
                    continue
                try:
                    self._process(task, resp)
                    self._refill()
                except IndexerdError:
                    raise
                except Exception:  # a bug on one page must not stop the crawl
                    log.exception("%s: processing %s failed", self.src.name, task.url)
                    self.counters.inc("error.internal")
                finally:
                    self.frontier.finish(task)
                self._persist_maybe()
            finished = not (self.cancel is not None and self.cancel.is_set())
            if finished and self.seed_hosts and self.seed_hosts <= self.unreachable:
                self.counts.failed = f"no seed host answered: {', '.join(sorted(self.unreachable))}"
        finally:
            self.frontier.stop()
            # a stop cuts every request within 0.05 s (Fetcher's cancel); a worker stuck past
            # that (a DNS lookup) is left behind: its URL stays queued for the resume
            join_by = time.monotonic() + (WORKER_STOP_SECONDS if self.cancel is not None and self.cancel.is_set()
                                          else float(self.cfg.timeout) + 5)
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
            self.pipeline.flush()
            self._persist(finished=finished)
        log.info("%s: crawl %s after %d requests (%d still queued)", self.src.name,
                 "finished" if finished else "interrupted", self.frontier.requests, self.frontier.queued())
        if self.mirror_failures > 1:
            log.warning("%s: %d mirror writes/removals under mirror_dir %s failed in this pass",
                        self.src.name, self.mirror_failures, self.src.mirror.root)

    def _start(self, state: PassState) -> None:
        """A new pass: seeds, then every URL requested before (re-checked conditionally)."""
        self.pass_id = state.id + 1
        self.pass_start = self.src.clock()
        self.table.drop_spilled()  # an older pass's overflow, never taken back
        for seed in self.cfg.seeds:
            url = canonicalize(seed)
            self._enqueue(url, hops=0, seed_depth=path_depth(url), via="seed")
        known = sorted((r for r in self.rows.values() if r.pass_id < self.pass_id and r.asked_before),
                       key=lambda r: (r.hops, r.seq))
        for r in known:
            if r.url in self.seen:  # a seed
                continue
            reason = self.src.scope.check(r.url, hops=r.hops, seed_depth=r.seed_depth)
            if reason is not None:
                self._out_of_scope(r, reason)
                continue
            if not self._due(r):
                self._defer(r.url)
                continue
            self._enqueue(r.url, hops=r.hops, seed_depth=r.seed_depth, via="recheck")
        self._persist(finished=False)

    def _due(self, row: dict) -> bool:
        """Whether a known URL is asked in this pass: always in a forced pass or when
        ``max_recrawl_interval`` equals ``interval`` (adaptive recrawl off), else when due."""
        return self.forced or self.max_interval <= self.min_interval or \
            is_due(row.due_at, self.pass_start, self.min_interval)

    def _defer(self, url: str) -> None:
        """Adaptive recrawl: ``url`` is not due in this pass; links to it do not queue it."""
        self.seen.add(url)
        self.not_due.add(url)
        self.counters.inc("web.recrawl.not-due")

    def _reschedule(self, row: dict, change: str) -> None:
        """Learn from one fetch of ``row``'s URL when to ask it again (:mod:`indexerd.sources.web.recrawl`)."""
        s = next_schedule(row.recrawl_seconds, change, self.pass_start, min_interval=self.min_interval,
                          max_interval=self.max_interval, changefreq=row.changefreq,
                          seed=row.via == "seed")
        row.recrawl_seconds, row.due_at, row.due_reason = s.interval_seconds, s.due_at, s.reason

    def _start_only(self, state: PassState) -> None:
        """``ctl reindex URL``: queue just :attr:`only`, within the current pass's id."""
        self.pass_id = state.id
        depth = {host_key(canonicalize(s)): path_depth(canonicalize(s)) for s in self.cfg.seeds}
        for url in self.only:
            row = self.rows.get(url)
            hops, seed_depth = (row.hops, row.seed_depth) if row else \
                (0, depth.get(host_key(url), path_depth(url)))
            self._enqueue(url, hops=hops, seed_depth=seed_depth, via="reindex", front=True)

    def _resume(self, state: PassState) -> None:
        """Continue an interrupted pass: what it did stays done, what it queued is queued (the
        frontier's overflow stays on disk until :meth:`_refill` takes it back); a forced pass
        (``ctl reindex --source``) stays forced."""
        self.pass_id = state.id
        self.forced = state.forced
        self.spill_left = True
        if state.started is not None:
            self.pass_start = state.started
        last = 0
        for r in sorted(self.rows.values(), key=lambda r: r.seq):
            if r.pass_id != self.pass_id:
                if r.asked_before and not self._due(r):
                    self._defer(r.url)
                continue
            self.seen.add(r.url)
            last = max(last, r.seq)
            if r.state == "queued":
                if r.via == "sitemapfile":
                    self._put_sitemap(r.url, count=False)
                    continue
                reason = self._scope_reason(r.url, r.hops, r.seed_depth)
                if reason is not None:  # queued by an older indexerd, or the config changed
                    self._out_of_scope(r, reason)
                    continue
                self.frontier.put(self._task_for(r))
        self.seq = itertools.count(last + 1)
        log.info("%s: resuming crawl pass %d (%d URLs seen, %d queued)", self.src.name, self.pass_id,
                 len(self.seen), self.frontier.queued())

    def _pass_state(self, finished: bool = False) -> PassState | None:
        """What :meth:`_persist` records as the pass's resume point (``ctl reindex URL``: none,
        the pass state is left as it is)."""
        if self.only is not None:
            return None
        return PassState(id=self.pass_id, running=not finished, started=self.pass_start, forced=self.forced)

    def _persist_maybe(self) -> None:
        self.table.write_maybe(self._pass_state())

    def _persist(self, finished: bool) -> None:
        self.table.write(self._pass_state(finished), finished=finished)

    # -- the frontier ---------------------------------------------------------------------
    def _validators(self, row: dict) -> tuple[str | None, str | None]:
        """The stored ETag and Last-Modified of the document ``row`` led to, when it is indexed
        (and, with a mirror, its file is there); else nothing, so the page is fetched whole."""
        if self.forced or (row.last_outcome or "").startswith("redirect"):
            return None, None  # a redirect's doc_key is its target: its validators are not ours
        rec = self.pipeline.stored(row.doc_key or row.url)
        if rec is None or not (rec.etag or rec.last_modified_header):
            return None, None
        if rec.status != "indexed" and not (rec.status == "skipped" and rec.reason in SKIPS_BY_CONTENT):
            return None, None
        if rec.status == "indexed" and self.src.mirror is not None and not self.src.mirror.exists(row.url):
            return None, None  # the mirror lost its copy: fetch it whole
        lm = rec.last_modified_header
        if lm is not None and not check_plausible(parse_date(lm), datetime.now(UTC)).value:
            lm = None  # an epoch or future "date" would make an exact-match server answer 304 for ever
        return rec.etag, lm

    def _task_for(self, row: dict, front: bool = False) -> Task:
        etag, lm = self._validators(row)
        url = row.url
        method = "GET" if etag or lm or _extension(url) in HTML_EXTENSIONS else "HEAD"
        return Task(url=url, host=host_key(url), hops=row.hops, seed_depth=row.seed_depth,
                    seq=row.seq, method=method, etag=etag, last_modified=lm, origin=row.origin,
                    redirects=row.redirects, front=front)

    def _frontier_full(self) -> bool:
        """``max_queued`` URLs wait in memory already: a new one goes to the store (spilled),
        taken back by :meth:`_refill` as the frontier drains."""
        return self.frontier.queued() >= self.cfg.max_queued

    def _spill_full(self) -> bool:
        """The window and the store's overflow (``SPILL_WINDOWS`` windows) are full: a new URL is
        dropped and counted, to be found again later in the pass or from the next pass's pages
        (their stored links)."""
        return self.spilled >= SPILL_WINDOWS * self.cfg.max_queued and self._frontier_full()

    def _refill(self) -> None:
        """Take spilled URLs back from the store once the in-memory frontier is half empty.

        Called by the coordinator while the task it processes is still outstanding, so the
        workers never see an empty frontier while URLs wait on disk."""
        if not self.spill_left or self.frontier.queued() > self.cfg.max_queued // 2:
            return
        rows = self.table.take_spilled(self.pass_id, max(1, self.cfg.max_queued // 2))
        if not rows:
            self.spill_left = False
            return
        for row in rows:
            if row.url in self.rows:  # queued again in memory since (a resumed pass)
                continue
            row.state = "queued"
            self.table.put(row)
            self.frontier.put(self._task_for(row))
        self.counters.inc("web.frontier.refilled", len(rows))
        self._persist(finished=False)  # before the next query: these rows are no longer spilled

    def _scope_reason(self, url: str, hops: int, seed_depth: int, kind: str = "page") -> str | None:
        """The one scope gate, applied when a URL is queued and again before it is fetched:
        None, or why ``url`` is not crawled (:meth:`Scope.check` then :func:`trap_reason` for a
        page; :meth:`Scope.check_site` for a sitemap file or robots.txt)."""
        if kind != "page":
            return self.src.scope.check_site(url)
        return self.src.scope.check(url, hops=hops, seed_depth=seed_depth) or trap_reason(url)

    def _task_gate(self, task: Task) -> str | None:
        """:meth:`_scope_reason` of a task the frontier is about to hand out (robots.txt is
        only asked for hosts of queued URLs, which passed the gate)."""
        if task.kind == "robots":
            return None
        return self._scope_reason(task.url, task.hops, task.seed_depth, task.kind)

    def _enqueue(self, url: str, *, hops: int, seed_depth: int, via: str, origin: str | None = None,
                 redirects: int = 0, front: bool = False) -> bool:
        """Add ``url`` to the frontier unless it was seen in this pass or the scope gate drops it
        (counted ``web.drop.<reason>``)."""
        if url in self.seen:
            return False
        spill = via in ("link", "sitemap") and url not in self.rows and self._frontier_full()
        if spill and self.spilled >= SPILL_WINDOWS * self.cfg.max_queued:
            self.counters.inc("web.drop.frontier-full")
            return False
        reason = self._scope_reason(url, hops, seed_depth)
        if reason is not None:
            self.counters.inc(f"web.drop.{reason}")
            return False
        self.seen.add(url)
        if spill:  # a new URL beyond the window: on disk only, taken back by _refill
            self.table.spill(UrlState(url, pass_id=self.pass_id, state="spilled", hops=hops,
                                      seed_depth=seed_depth, seq=next(self.seq), via=via))
            self.spilled += 1
            self.spill_left = True
            self.counters.inc("web.frontier.spilled")
            return True
        row = self.rows.get(url) or UrlState(url)
        row.pass_id, row.state, row.hops, row.seed_depth = self.pass_id, "queued", hops, seed_depth
        row.seq, row.via, row.origin, row.redirects = next(self.seq), via, origin, redirects
        self.table.put(row)
        self.frontier.put(self._task_for(row, front=front))
        return True

    def _put_sitemap(self, url: str, count: bool = True) -> None:
        reason = self._scope_reason(url, 0, 1, "sitemap")
        if reason is not None:
            self.counters.inc(f"web.drop.sitemap-{reason}")
            return
        if count:
            if url in self.seen or self.sitemap_files >= MAX_SITEMAP_FILES:
                return
            self.sitemap_files += 1
            self.seen.add(url)
            row = self.rows.get(url) or UrlState(url)
            row.pass_id, row.state, row.seq, row.via = self.pass_id, "queued", next(self.seq), "sitemapfile"
            self.table.put(row)
        self.frontier.put(Task(url=url, host=host_key(url), kind="sitemap", front=True))

    def _follow(self, links, task: Task, why: str = "link") -> int:
        """Filter (scope, then traps) and enqueue the canonical outlinks of a page; return how
        many of them are URLs never seen before (adaptive recrawl counts that as a change).

        Each dropped URL is counted once per pass (``web.drop.<reason>``, ``web.trap.<reason>``);
        a drop that depends on the path taken (``max-hops``, ``path-depth``) is not remembered,
        as another page may reach the URL in fewer hops.
        """
        if self.only is not None:
            return  # ctl reindex URL: the page's links are stored, not crawled
        hops = task.hops + 1
        new = 0
        for link in links:
            if link in self.seen or link in self.dropped:
                continue
            if self._spill_full():  # before the costlier checks: a page of 10,000 links
                self.counters.inc("web.drop.frontier-full")
                continue
            reason = self.src.scope.check(link, hops=hops, seed_depth=task.seed_depth)
            kind = "drop"
            if reason is None:
                kind = "trap"
                reason = trap_reason(link)
                if reason is None and not self.query_variants.admit(link):
                    reason = "query-variants"
                if reason is None:
                    reason = self.patterns.admit(link)
            if reason is not None:
                if reason not in ("max-hops", "path-depth") and len(self.dropped) < MAX_DROPPED_REMEMBERED:
                    self.dropped.add(link)
                self.counters.inc(f"web.{kind}.{reason}")
                continue
            unknown = link not in self.rows
            if self._enqueue(link, hops=hops, seed_depth=task.seed_depth, via=why) and unknown:
                new += 1
        return new

    def _canonical_links(self, raw, encoding: str | None) -> list[str]:
        out: list[str] = []
        seen: set[str] = set()
        for link in raw:
            try:  # the fragment never matters; pages share most links: one cached call each
                c = _canonical_link(link.partition("#")[0], encoding)
            except ValueError:
                if link[:8].lower().startswith(("http://", "https://")):
                    self.counters.inc("web.drop.invalid")  # mailto:, javascript: ... are not links to crawl
                continue
            if c not in seen:
                seen.add(c)
                out.append(c)
        if len(out) > MAX_LINKS_PER_PAGE:
            self.counters.inc("web.trap.too-many-links")
            out = out[:MAX_LINKS_PER_PAGE]
        return out

    # -- results --------------------------------------------------------------------------
    def _row(self, url: str) -> dict:
        row = self.rows.get(url)
        if row is None:
            row = UrlState(url, pass_id=self.pass_id, seq=next(self.seq))
        self.table.put(row)
        return row

    def _done(self, task: Task, resp: Response | None, outcome: str) -> dict:
        row = self._row(task.url)
        row.state, row.last_outcome, row.checked_at = "done", outcome, datetime.now(UTC)
        if resp is not None:
            row.last_status = resp.status if resp.status is not None else 0  # 0: no HTTP answer
        return row

    def _process(self, task: Task, resp: Response | None) -> None:
        if resp is not None and resp.error == "cancelled":
            # the stop cut the request: nothing was learnt, the URL stays queued for the resume
            self.counters.inc("web.cancelled")
            return
        if resp is not None and resp.error == "invalid-url" and task.kind != "robots":
            self._done(task, resp, "invalid-url")
            self.counters.inc("web.drop.invalid")
            return
        if task.kind == "robots":
            self._robots_result(task, resp)
            return
        if task.skip is not None:
            self._skipped(task)
            return
        if task.kind == "sitemap":
            self._sitemap_result(task, resp)
            return
        self.done_pages += 1
        if self.progress is not None and hasattr(self.progress, "tick_crawl"):
            self.progress.tick_crawl(self.done_pages, self.frontier.queued())
        if resp.error is not None and resp.error != "too-large":
            self._failed(task, resp, resp.error)
        elif resp.not_modified:
            self._not_modified(task, resp)
        elif resp.is_redirect:
            self._redirect(task, resp)
        elif task.method == "HEAD" and resp.status in (405, 501):
            self.frontier.refund()  # HEAD not supported there: ask with GET
            self.frontier.put(replace(task, method="GET", front=True))
        elif resp.status in (404, 410):
            self._gone(task, resp)
        elif resp.status in (429, 503) or resp.status >= 500:
            if resp.status in (429, 503) and task.attempts + 1 < MAX_RETRY_AFTER_ATTEMPTS:
                self.counters.inc(f"web.retry.http-{resp.status}")
                self.frontier.refund()  # a retry does not spend the page budget twice
                self.frontier.put(replace(task, attempts=task.attempts + 1))
                return
            self._failed(task, resp, f"http-{resp.status}")
        elif resp.status >= 400 or resp.status < 200 or resp.status >= 300:
            self._refused(task, resp)
        elif task.method == "HEAD":
            self._head_result(task, resp)
        else:
            self._page(task, resp)

    def _robots_result(self, task: Task, resp: Response | None) -> None:
        rules = self.src.robots.get(task.host)
        if rules is None:  # the worker failed before storing them
            resp = resp or Response(url=task.url, method="GET", status=None, headers={}, body=b"",
                                    elapsed=0.0, error="internal")
            rules = self.src.robots.put_response(task.host, resp)
        self.counters.inc(f"web.robots.{rules.status}")
        if rules.status == "unreachable":
            self._host_unreachable(task.host, resp.error or f"HTTP {resp.status}")
        if self.cfg.sitemaps and self.only is None and task.host in self.seed_hosts \
                and task.host not in self.sitemaps_asked:
            self.sitemaps_asked.add(task.host)
            maps = list(rules.sitemaps) or [task.host + "/sitemap.xml"]
            for m in maps:
                try:
                    url = canonicalize(m)
                except ValueError:
                    continue
                if host_key(url) in self.seed_hosts:
                    self._put_sitemap(url)

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
        if task.skip not in ("robots", "robots-unreachable", "host-down"):
            row = self.rows.get(task.url)
            if row is not None:
                self._out_of_scope(row, task.skip)
            else:
                self.counters.inc(f"web.drop.{task.skip}")
            return
        self.counters.inc(f"web.drop.{task.skip}")
        if task.kind == "sitemap":
            self._done(task, None, task.skip)
            return
        row = self._done(task, None, task.skip)
        if self.only is not None:  # asked for by name (ctl reindex URL): say it was not fetched
            self.counts.record(Verdict.SKIPPED)
        if task.skip == "robots":
            key = row.doc_key or task.url
            if self.pipeline.stored(key) is not None:
                self.pipeline.gone(key, self.counts, "robots.txt disallows it")
                self._mirror_remove(task.url)
            row.last_outcome = "gone"
            row.last_status = None  # never requested: not re-checked unless linked again

    def _sitemap_result(self, task: Task, resp: Response) -> None:
        row = self._done(task, resp, "sitemap")
        if resp.error is not None or resp.status != 200:
            self.counters.inc("web.sitemap.unavailable")
            return
        from indexerd.sources.web.sitemap import parse_sitemap

        try:
            pages, children = parse_sitemap(resp.body, max_entries=MAX_SITEMAP_URLS)
        except ValueError as e:
            self.counters.inc("web.sitemap.invalid")
            log.warning("%s: %s: not a usable sitemap: %s", self.src.name, task.url, e)
            return
        row.last_outcome = f"sitemap:{len(pages)}+{len(children)}"
        if max(len(pages), len(children)) >= MAX_SITEMAP_URLS:
            self.counters.inc("web.sitemap.truncated")  # the rest of the file is not read
        for child in children:
            try:
                url = canonicalize(child.loc)
            except ValueError:
                continue
            if host_key(url) in self.seed_hosts:
                self._put_sitemap(url)
        seed_depth = min(path_depth(canonicalize(s)) for s in self.cfg.seeds
                         if host_key(canonicalize(s)) == task.host)
        hops = 1
        for i, entry in enumerate(pages):
            if self._spill_full():
                self.counters.inc("web.drop.frontier-full", len(pages) - i)
                break
            try:
                url = canonicalize(entry.loc)
            except ValueError:
                continue
            reason = self._scope_reason(url, hops, seed_depth)
            if reason is not None:  # before any row is made: an out-of-scope entry leaves no trace
                self.counters.inc(f"web.drop.{reason}")
                continue
            if entry.lastmod or entry.changefreq:
                r = self._row(url)
                r.sitemap_lastmod = entry.lastmod or r.sitemap_lastmod
                r.changefreq = entry.changefreq or r.changefreq
            if url in self.not_due and self._changed_since_checked(url, entry.lastmod):
                self.not_due.discard(url)  # the sitemap says it changed: due now
                self.seen.discard(url)
                self.counters.inc("web.recrawl.sitemap-lastmod")
                r = self.rows[url]
                self._enqueue(url, hops=r.hops, seed_depth=r.seed_depth, via="recheck")
            elif self._enqueue(url, hops=hops, seed_depth=seed_depth, via="sitemap"):
                self.counters.inc("web.sitemap.urls")

    def _changed_since_checked(self, url: str, lastmod: str | None) -> bool:
        """A sitemap ``<lastmod>`` later than the URL's last check (both real times, UTC)."""
        changed, checked = parse_date(lastmod), self.rows[url].checked_at
        return changed is not None and checked is not None and changed > checked

    def _failed(self, task: Task, resp: Response, reason: str) -> None:
        """5xx, timeouts, connection errors: keep the indexed copy, retry next pass."""
        row = self._done(task, resp, reason)
        row.fail_count += 1
        self._reschedule(row, FAILED)
        self.counts.fail(f"{task.url}: {reason} {resp.detail or ''}".rstrip())
        self.counters.inc(f"error.{reason}")
        log.warning("%s: %s: %s %s", self.src.name, task.url, reason, resp.detail or "")
        if self.src.slots.failures(task.host) >= HOST_FAILURE_LIMIT:
            self.counters.inc("web.host-down")
            log.warning("%s: %s failed %d times in a row; its other URLs wait for the next pass",
                        self.src.name, task.host, HOST_FAILURE_LIMIT)
            self.frontier.drop_host(task.host, "host-down")

    def _count_unfetchable(self, key: str, reason: str) -> None:
        """A page that answered but cannot be indexed now: an error if we hold an indexed copy
        (kept), a skip if we never had one."""
        if self.pipeline.stored(key) is not None:
            self.counts.fail(f"{key}: {reason}; the indexed copy is kept")
            self.counters.inc(f"error.{reason}")
        else:
            self.counts.record(Verdict.SKIPPED)
            self.counters.inc(f"skip.{reason}")

    def _refused(self, task: Task, resp: Response) -> None:
        """401, 403, other 4xx and odd statuses: not a confirmed deletion; keep what is indexed."""
        reason = f"http-{resp.status}"
        row = self._done(task, resp, reason)
        self._reschedule(row, FAILED)
        self._count_unfetchable(row.doc_key or task.url, reason)

    def _gone(self, task: Task, resp: Response) -> None:
        """404 / 410: delete after ``gone_after`` answers in a row (only a confirmed 404 deletes)."""
        reason = f"http-{resp.status}"
        row = self._done(task, resp, reason)
        row.gone_count += 1
        self._reschedule(row, FAILED)
        key = row.doc_key or task.url
        if row.gone_count >= self.cfg.gone_after:
            row.last_outcome = "gone"
            if self.pipeline.stored(key) is not None:
                self.pipeline.gone(key, self.counts, f"HTTP {resp.status}")
                self._mirror_remove(task.url)
                return
        self._count_unfetchable(key, reason)

    def _redirect(self, task: Task, resp: Response) -> None:
        row = self._done(task, resp, f"redirect-{resp.status}")
        self.counters.inc("web.redirect")
        self._reschedule(row, UNCHANGED)  # a failure to follow it reschedules it as failed
        self._follow_redirect(task, resp, row, resp.location, resp.permanent_redirect)

    def _html_redirect(self, task: Task, resp: Response, row: dict, target: str, encoding: str | None,
                       how: str = "meta-refresh") -> None:
        """A ``<meta http-equiv=refresh>`` stub (``Extracted.redirect``) or an instant HTTP
        ``Refresh`` header: followed like an HTTP redirect (same hop limit, scope and robots.txt),
        and, like a permanent one, the stub's own URL is no document (an indexed copy of it is
        deleted)."""
        row.last_outcome = "redirect-meta"
        self.counters.inc(f"web.redirect.{how}")
        self.table.set_links(task.url, None)
        self._reschedule(row, UNCHANGED)
        self._follow_redirect(task, resp, row, target, True, encoding)

    def _follow_redirect(self, task: Task, resp: Response, row: dict, location: str, permanent: bool,
                         encoding: str | None = None) -> None:
        """Queue a redirect's target at the front, with the hops of the URL first requested;
        ``MAX_REDIRECTS`` hops (HTTP and HTML together) or a cycle fail as ``redirect-loop``."""
        origin = task.origin or task.url
        try:
            target = canonicalize(location, encoding=encoding)
        except ValueError:
            self._failed(task, resp, "bad-redirect")
            return
        if task.redirects + 1 > MAX_REDIRECTS or target in (task.url, origin):
            self._failed(task, resp, "redirect-loop")
            return
        row.doc_key = target
        if permanent:
            old = self._row(origin).doc_key if origin != task.url else None
            for key in {task.url, old} - {None, target}:
                if self.pipeline.stored(key) is not None:
                    self.pipeline.gone(key, self.counts, f"moved permanently to {target}")
                    self._mirror_remove(key)
        reason = trap_reason(target) or self.src.scope.check(target, hops=task.hops,
                                                              seed_depth=task.seed_depth)
        if reason is not None:
            self.counters.inc(f"web.drop.redirect-{reason}")
            return
        self._enqueue(target, hops=task.hops, seed_depth=task.seed_depth, via="redirect", origin=origin,
                      redirects=task.redirects + 1, front=True)

    def _not_modified(self, task: Task, resp: Response) -> None:
        """304: unchanged; no body, no parse, no index write -- but its stored links are followed."""
        row = self._done(task, resp, "not-modified")
        row.gone_count = row.fail_count = 0
        self.pipeline.not_modified(row.doc_key or task.url, self.counts)
        links = self.table.links_of(task.url)
        new = self._follow(links, task) if links else 0
        self._reschedule(row, CHANGED if new else UNCHANGED)

    def _head_result(self, task: Task, resp: Response) -> None:
        """LCWA: HEAD first for what does not look like HTML; GET only what we index."""
        ctype = resp.headers.get("Content-Type")
        length = resp.headers.get("Content-Length")
        if guess_media_type(task.url, b"", ctype) is None:
            row = self._done(task, resp, "unsupported-type")
            self._reschedule(row, UNCHANGED)
            self.pipeline.skip(row.doc_key or task.url, self.src.name, "unsupported-type",
                               f"{task.url}: {ctype or 'no Content-Type'} is not indexed", self.counts)
            return
        if length and length.isdigit() and int(length) > self.src.max_size:
            row = self._done(task, resp, "too-large")
            self._reschedule(row, UNCHANGED)
            self.pipeline.skip(row.doc_key or task.url, self.src.name, "too-large",
                               f"{task.url}: {length} bytes > max_size {self.src.max_size}", self.counts,
                               size=int(length))
            return
        self.frontier.refund()  # the GET is part of the same page
        self.frontier.put(replace(task, method="GET", front=True))

    def _page(self, task: Task, resp: Response) -> None:
        row = self._done(task, resp, "fetched")
        row.gone_count = row.fail_count = 0
        key = task.url
        if resp.error == "too-large":
            self.pipeline.skip(row.doc_key or key, self.src.name, "too-large",
                               f"{task.url}: more than max_size {self.src.max_size} bytes", self.counts)
            row.last_outcome = "too-large"
            self._reschedule(row, UNCHANGED)
            return
        refresh = parse_refresh(resp.headers.get("Refresh") or "")
        if refresh is not None and refresh[0] == 0:  # the header form browsers follow at once
            self._html_redirect(task, resp, row, urljoin(task.url, refresh[1]), None, "refresh-header")
            return
        robots_header = _header_tokens(resp.headers.get("X-Robots-Tag"), self.src.token)
        ctype = resp.headers.get("Content-Type")
        f = Fetched(key=key, source=self.src.name, url=task.url, data=resp.body,
                    fetched_at=datetime.now(UTC), name=urlsplit(task.url).path or "/",
                    declared_type=ctype, base_url=task.url,
                    protocol_date=resp.headers.get("Last-Modified"), protocol_kind="header",
                    server_date=resp.headers.get("Date"), sitemap_date=row.sitemap_lastmod,
                    size=len(resp.body), etag=resp.headers.get("ETag"),
                    last_modified_header=resp.headers.get("Last-Modified"))
        if "noindex" in robots_header:
            self.pipeline.skip(row.doc_key or key, self.src.name, "noindex", "X-Robots-Tag noindex",
                               self.counts, size=f.size, etag=f.etag,
                               last_modified_header=f.last_modified_header)
            self._mirror_remove(task.url)
            row.doc_key = key
            new = 0
            if "nofollow" not in robots_header:
                try:
                    new = self._store_links(row, PageLinks.of(extract(resp.body, ctype, base_url=task.url,
                                                                      name=f.name)), task)
                except SkipDocument:  # not HTML: no links to follow
                    pass
            self._reschedule(row, CHANGED if new else UNCHANGED)
            return
        old_key = row.doc_key
        self.duplicates.begin()
        out = self.pipeline.handle(f, self.src.pipeline_policy, self.counts, forced=self.forced,
                                   rekey=lambda ex: self._canonical_key(ex, key), redirects=True,
                                   duplicate_of=self.duplicates.duplicate_of)
        if out.verdict is Verdict.REDIRECT:
            self._html_redirect(task, resp, row, out.links.redirect, out.links.encoding)
            return
        if out.content_hash is not None:
            for alias in self.duplicates.kept(out.key, out.content_hash):
                self._mirror_remove(alias)
        new_key = out.key or key
        if old_key and old_key != new_key and old_key != key and self.pipeline.stored(old_key) is not None \
                and task.origin is None:
            self.pipeline.gone(old_key, self.counts, f"now indexed as {new_key}")
        row.doc_key = new_key
        if task.origin is not None:
            self._row(task.origin).doc_key = new_key
        row.last_outcome = f"{out.verdict}:{out.reason}"
        if self.src.mirror is not None:
            if out.verdict in ("indexed", "unchanged"):
                self._mirror_write(task.url, resp.body, out.last_modified)
            elif out.verdict in ("skipped", "errors"):
                self._mirror_remove(task.url)
        page = out.links
        new = 0
        if page is not None and not page.nofollow and "nofollow" not in robots_header:
            new = self._store_links(row, page, task)
        else:
            self.table.set_links(task.url, None)
        self._reschedule(row, FAILED if out.verdict == "errors" else
                         CHANGED if out.verdict == "indexed" or new else UNCHANGED)

    def _store_links(self, row: UrlState, page: PageLinks, task: Task) -> int:
        """Keep a page's canonical outlinks and follow them; the count of never-seen URLs."""
        links = self._canonical_links(page.links, page.encoding)
        self.table.set_links(row.url, links)
        return self._follow(links, task)

    def _canonical_key(self, page: PageLinks, key: str) -> str | None:
        """``rel=canonical`` on the same host names the document (LIBRARIES.md §11)."""
        if not page.canonical:
            return None
        try:
            c = canonicalize(page.canonical, page.encoding)
        except ValueError:
            return None
        return c if host_key(c) == host_key(key) else None

    def _out_of_scope(self, row: dict, reason: str) -> None:
        """A URL known from an earlier pass that the config no longer covers: forget it."""
        key = row.doc_key or row.url
        if self.pipeline.stored(key) is not None:
            self.pipeline.gone(key, self.counts, f"out of scope ({reason})")
            self._mirror_remove(row.url)
        self.table.remove(row.url)
        if reason not in ("max-hops", "path-depth"):
            self.dropped.add(row.url)  # links to it are not counted again in this pass
        self.counters.inc(f"web.drop.{reason}")

    # -- mirror ---------------------------------------------------------------------------
    def _mirror_failed(self, what: str, url: str, e: Exception) -> None:
        """One mirror write or removal failed: counted (``error.mirror``, in ``ctl status``);
        the first of the pass is logged as a warning naming ``mirror_dir`` and the error, the
        others at debug level (an unwritable mirror_dir fails every page: one line, not one per
        page), and :meth:`run` logs how many failed when the pass ends."""
        self.counters.inc("error.mirror")
        self.mirror_failures += 1
        if self.mirror_failures == 1:
            log.warning("%s: mirror_dir %s: %s %s failed: %s; further mirror failures of this pass are "
                        "only counted (error.mirror)", self.src.name, self.src.mirror.root, what, url, e)
        else:
            log.debug("%s: mirror %s of %s failed: %s", self.src.name, what, url, e)

    def _mirror_write(self, url: str, data: bytes, mtime: datetime | None) -> None:
        try:
            self.src.mirror.write(url, data, mtime)
        except (OSError, ValueError) as e:
            self._mirror_failed("writing", url, e)

    def _mirror_remove(self, url: str) -> None:
        if self.src.mirror is None:
            return
        try:
            self.src.mirror.remove(url)
        except (OSError, ValueError) as e:
            self._mirror_failed("removing", url, e)
