"""The crawl's fetch workers: take a task from the frontier, make its request, hand the result to
the coordinator.  Workers only talk HTTP (LCWA: parallel fetchers over one shared frontier and
a result pool); everything else is the coordinator's (:mod:`indexerd.sources.web.crawlpass`).

Per task: one request within the host's politeness slot, which the frontier acquired and the
worker releases (with the response's time, failure and Retry-After: :mod:`indexerd.sources.web.politeness`);
robots.txt with its redirects (RFC 9309 §2.3.1.2, :func:`indexerd.sources.web.robots.follow_redirects`),
the verdict stored before the slot is freed so its Crawl-delay applies at once.  A stop (the
``cancel`` Event) cuts the request in flight (:meth:`indexerd.sources.web.fetch.Fetcher.fetch`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import replace

from indexerd.sources.web.fetch import Fetcher
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Frontier, Task
from indexerd.sources.web.robots import MAX_ROBOTS_BYTES, follow_redirects
from indexerd.sources.web.urls import host_key

log = logging.getLogger(__name__)

#: Bytes read of a sitemap file (the sitemaps.org limit, uncompressed).
MAX_SITEMAP_BYTES = 50 * 1024 * 1024


class FetchWorkers:
    """What every worker thread of one pass shares; :meth:`run` is a thread's target.

    Args:
        src: the :class:`indexerd.sources.web.source.WebCrawlSource` (scope, robots cache, slots, politeness, limits).
        frontier: the pass's frontier.
        results: where ``(task, response)`` go, ``response`` None for a skipped task.
        fetcher: the source's HTTP client.
        counters: the pass's named counters.
        cancel: the stop Event, or None.
    """

    def __init__(self, src, frontier: Frontier, results: queue.Queue, fetcher: Fetcher, counters,
                 cancel: threading.Event | None) -> None:
        self.src = src
        self.name = src.name
        self.timeout = float(src.cfg.timeout)
        self.frontier = frontier
        self.results = results
        self.fetcher = fetcher
        self.counters = counters
        self.cancel = cancel

    def run(self) -> None:
        """One worker thread's life: take, fetch, hand over, until the frontier says the pass
        is over; then ``(None, None)`` tells the coordinator this worker is gone."""
        try:
            self._work(self.fetcher)
        finally:
            self.results.put((None, None))

    def _work(self, fetcher: Fetcher) -> None:
        while True:
            task = self.frontier.take(self.cancel)
            if task is None:
                return
            if task.skip is not None:
                self.results.put((task, None))
                continue
            resp = None
            try:
                if task.kind == "robots":
                    resp, hops = self._fetch_robots(fetcher, task)
                    # the rules (and their Crawl-delay) must be known before the slot is freed
                    if resp.error not in ("cancelled", "paused"):  # nothing learnt: asked again
                        self.src.robots.put_response(task.host, resp, hops=hops)
                else:
                    max_size = self.src.max_size if task.kind in ("page", "requisite") else MAX_SITEMAP_BYTES
                    resp = fetcher.fetch(task.url, method=task.method, etag=task.etag,
                                         last_modified=task.last_modified, max_size=max_size, cancel=self.cancel)
            except ValueError as e:  # a URL the HTTP client refuses: dropped, not a failure of the site
                log.warning("%s: %s: not requested: %s", self.name, task.url, e)
                resp = Response(url=task.url, method=task.method, status=None, headers={}, body=b"",
                                elapsed=0.0, error="invalid-url", detail=str(e))
            except Exception as e:  # a bug in the fetcher must not lose the task
                log.exception("%s: fetching %s failed", self.name, task.url)
                resp = Response(url=task.url, method=task.method, status=None, headers={}, body=b"",
                                elapsed=0.0, error="internal", detail=str(e))
            finally:
                self._release(task, resp)
                self.frontier.wake()
            self.results.put((task, resp))

    def _fetch_robots(self, fetcher: Fetcher, task: Task) -> tuple[Response, int]:
        """robots.txt and its redirects (:func:`~indexerd.sources.web.robots.follow_redirects`, RFC 9309
        §2.3.1.2): a hop goes only to the source's site (:meth:`Scope.check_site`: its hosts and
        ports), after the politeness delay; a hop to another host of the site takes that host's
        slot too (not free within ``timeout``: the redirect is the answer, i.e. allow-all)."""
        first = True

        def get(url: str) -> Response:
            nonlocal first
            host = host_key(url)
            if not first:
                if self.cancel is not None and self.cancel.wait(self.src.politeness.min_delay):
                    return Response(url=url, method="GET", status=None, headers={}, body=b"", elapsed=0.0,
                                    error="cancelled")
                if self.cancel is None:
                    time.sleep(self.src.politeness.min_delay)
            first = False
            other = host != task.host
            if other and not self.src.slots.acquire(host, cancel=self.cancel, timeout=self.timeout):
                return Response(url=url, method="GET", status=None, headers={}, body=b"", elapsed=0.0,
                                error="too-slow", detail=f"{host} busy")
            resp = None
            try:
                resp = fetcher.fetch(url, max_size=MAX_ROBOTS_BYTES, truncate=True, cancel=self.cancel)
                return resp
            finally:
                if other:
                    self._release(replace(task, host=host), resp)

        def follow(target: str) -> bool:
            reason = self.src.scope.check_site(target)
            if reason is not None:
                self.counters.inc(f"web.drop.robots-redirect-{reason}")
            return reason is None

        return follow_redirects(task.url, get, follow)

    def _release(self, task: Task, resp: Response | None) -> None:
        ok = resp is not None and ((resp.status is not None and resp.status < 500 and resp.status != 429)
                                   or resp.error in ("cancelled", "paused"))  # not the host's failure
        rules = self.src.robots.get(task.host)
        self.src.slots.release(task.host, self.src.politeness, elapsed=resp.elapsed if resp else 0.0,
                               ok=ok, crawl_delay=(min(rules.crawl_delay, self.src.max_crawl_delay)
                                                   if rules is not None and rules.crawl_delay else None),
                               retry_after=resp.retry_after if resp is not None else None)
