"""What a pass does with each answer to a page request: the verdicts of
:mod:`indexerd.sources.web.responses` applied to the document pipeline, the mirror, the URL's
state and the scheduler.

What is deleted: a confirmed 404/410 (after ``gone_after`` answers in a row), a page robots.txt
now disallows, a page now out of scope, a page that turned ``noindex``, and the old key after a
permanent redirect.  Nothing else: 5xx, timeouts, other 4xx and pages not reached keep their
indexed copy.  Used by the thread that runs the pass only.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timezone
from urllib.parse import urlsplit

from indexerd.core.errors import SkipDocument
from indexerd.core.counts import PassCounts
from indexerd.pipeline.fetched import Fetched
from indexerd.core.outcome import PageLinks, Verdict
from indexerd.pipeline.stages import Pipeline
from indexerd.extract import extract
from indexerd.extract.extracted import MEDIA_HTML
from indexerd.sources.web.duplicates import DuplicateFinder
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Task
from indexerd.sources.web.mirror import PassMirror
from indexerd.sources.web.mirrorlinks import KeptForConversion
from indexerd.sources.web.requisiteanswers import RequisiteAnswers
from indexerd.sources.web.recrawl import CHANGED, FAILED, UNCHANGED
from indexerd.sources.web.requisites import OUTCOME as REQUISITE_OUTCOME
from indexerd.sources.web.requisites import content_charset
from indexerd.sources.web.responses import (gone_verdict, head_verdict, instant_refresh, redirect_verdict,
                                            robots_directives, status_verdict)
from indexerd.sources.web.scheduler import Scheduler
from indexerd.sources.web.urls import canonicalize, host_key
from indexerd.sources.web.urlstate import UrlState

log = logging.getLogger(__name__)
UTC = timezone.utc

#: Requests in a row to one host that got no HTTP answer at all (timeouts, refused or reset
#: connections) after which its remaining URLs wait for the next pass.  HTTP errors (5xx) do not
#: count: a server that answers is up, and the politeness backoff spaces the requests (Heritrix
#: and Nutch give up on unreachable servers, not on erroring ones).
HOST_FAILURE_LIMIT = 5


class Answers:
    """Applies the answers to one pass's page requests.

    Args:
        sched: the pass's scheduler.
        pipeline: the document pipeline.
        counts: the pass's counts.
        mirror: the pass's mirror.
    """

    def __init__(self, sched: Scheduler, pipeline: Pipeline, counts: PassCounts, mirror: PassMirror) -> None:
        self.sched = sched
        self.src = sched.src
        self.pipeline = pipeline
        self.counts = counts
        self.counters = pipeline.counters
        self.mirror = mirror
        self.duplicates = DuplicateFinder(self.src.name, pipeline)
        #: what the mirror kept in this pass, its links rewritten at the pass's end (``convert_links``)
        self.kept_for_conversion = KeptForConversion(mirror, self.src.cfg.convert_links, self.counters)
        self.requisites = RequisiteAnswers(sched, pipeline, counts, mirror, self.kept_for_conversion)
        #: per host: requests in a row without any HTTP answer (see HOST_FAILURE_LIMIT)
        self.unanswered: dict[str, int] = {}

    def handle(self, task: Task, resp: Response) -> None:
        """One answer to a page request, by :func:`~indexerd.sources.web.responses.status_verdict`
        (a cancelled request and an invalid URL are the engine's, before any handler)."""
        v = status_verdict(task, resp)
        if resp.status is not None:
            self.unanswered.pop(task.host, None)  # the server answered: it is up
        if v.action == "failed":
            self.failed(task, resp, v.reason)
        elif v.action == "not-modified":
            self._not_modified(task, resp)
        elif v.action == "redirect":
            st = self.sched.done(task, resp, v.reason)
            self.counters.inc("web.redirect")
            self.sched.reschedule(st, UNCHANGED)  # a failure to follow it reschedules it as failed
            self._follow_redirect(task, resp, st, resp.location or "", resp.permanent_redirect)
        elif v.action == "retry" and v.retry is not None:
            self.counters.inc(f"web.retry.{v.reason}")
            self.sched.retry(v.retry)
        elif v.action == "get" and v.retry is not None:  # HEAD not supported there: ask with GET
            self.sched.retry(v.retry)
        elif v.action == "gone":
            self._gone(task, resp, v.reason)
        elif v.action == "refused":
            st = self.sched.done(task, resp, v.reason)
            self.sched.reschedule(st, FAILED)
            self._count_unfetchable(st.key, v.reason)
        elif v.action == "head":
            self._head(task, resp)
        elif v.action == "page":
            self._page(task, resp)

    # -- deletions and failures -------------------------------------------------------------
    def retire(self, key: str, why: str, mirror_url: str | None = None) -> bool:
        """Delete the indexed copy of ``key`` if there is one (and ``mirror_url``'s file);
        True when there was one."""
        if self.pipeline.stored(key) is None:
            return False
        self.pipeline.gone(key, self.counts, why)
        if mirror_url is not None:
            self.mirror.remove(mirror_url)
        return True

    def drop_orphan(self, url: str) -> None:
        """A page requisite no page needs any more (:mod:`indexerd.sources.web.orphans`): its
        document row (a skipped ``requisite``) is deleted and its file removed from the mirror."""
        if not self.retire(url, "a page requisite no page references any more", url):
            self.mirror.remove(url)

    def out_of_scope(self, st: UrlState, reason: str) -> None:
        """A URL known from an earlier pass that the config no longer covers: forget it."""
        self.retire(st.key, f"out of scope ({reason})", st.url)
        self.sched.forget(st, reason)

    def failed(self, task: Task, resp: Response, reason: str) -> None:
        """5xx, timeouts, connection errors: keep the indexed copy, retry next pass; after
        ``HOST_FAILURE_LIMIT`` requests in a row without an HTTP answer the host's other URLs
        wait for the next pass."""
        st = self.sched.done(task, resp, reason)
        st.fail_count += 1
        self.sched.reschedule(st, FAILED)
        self.counts.fail(f"{task.url}: {reason} {resp.detail or ''}".rstrip())
        self.counters.inc(f"error.{reason}")
        log.warning("%s: %s: %s %s", self.src.name, task.url, reason, resp.detail or "")
        if resp.status is None:
            self.unanswered[task.host] = self.unanswered.get(task.host, 0) + 1
        if self.unanswered.get(task.host, 0) >= HOST_FAILURE_LIMIT:
            self.counters.inc("web.host-down")
            log.warning("%s: %s did not answer %d times in a row; its other URLs wait for the next pass",
                        self.src.name, task.host, HOST_FAILURE_LIMIT)
            self.sched.frontier.drop_host(task.host, "host-down")

    def _count_unfetchable(self, key: str, reason: str) -> None:
        """A page that answered but cannot be indexed now: an error if we hold an indexed copy
        (kept), a skip if we never had one."""
        if self.pipeline.stored(key) is not None:
            self.counts.fail(f"{key}: {reason}; the indexed copy is kept")
            self.counters.inc(f"error.{reason}")
        else:
            self.counts.record(Verdict.SKIPPED)
            self.counters.inc(f"skip.{reason}")

    def _gone(self, task: Task, resp: Response, reason: str) -> None:
        """404 / 410: delete after ``gone_after`` answers in a row (only a confirmed 404 deletes)."""
        st = self.sched.done(task, resp, reason)
        g = gone_verdict(st, self.sched.cfg.gone_after)
        st.gone_count = g.gone_count
        self.sched.reschedule(st, FAILED)
        if g.confirmed:
            st.last_outcome = "gone"
            if self.retire(st.key, f"HTTP {resp.status}", task.url):
                return
        self._count_unfetchable(st.key, reason)

    # -- redirects --------------------------------------------------------------------------
    def _html_redirect(self, task: Task, resp: Response, st: UrlState, target: str, encoding: str | None,
                       how: str = "meta-refresh") -> None:
        """A ``<meta http-equiv=refresh>`` stub or an instant HTTP ``Refresh`` header: followed
        like an HTTP redirect (same hop limit, scope and robots.txt), and, like a permanent one,
        the stub's own URL is no document (an indexed copy of it is deleted)."""
        st.last_outcome = "redirect-meta"
        self.counters.inc(f"web.redirect.{how}")
        self.sched.table.set_links(task.url, None)
        self.sched.reschedule(st, UNCHANGED)
        self._follow_redirect(task, resp, st, target, True, encoding)

    def _follow_redirect(self, task: Task, resp: Response, st: UrlState, location: str, permanent: bool,
                         encoding: str | None = None) -> None:
        """Queue a redirect's target at the front, with the hops of the URL first requested
        (:func:`~indexerd.sources.web.responses.redirect_verdict`)."""
        origin = task.origin or task.url
        origin_key = self.sched.state(origin).doc_key if permanent and origin != task.url else None
        v = redirect_verdict(task, location, permanent=permanent, origin_key=origin_key, encoding=encoding)
        if v.failure is not None or v.target is None:
            self.failed(task, resp, v.failure or "bad-redirect")
            return
        target = v.target
        if task.kind == "requisite":  # the target is the requisite, wherever it moved
            self.sched.table.set_requisites(task.url, [target], nested=True)  # needed while this is
            self.sched.follow_requisites([target], task)
            return
        st.doc_key = target
        for key in v.retire:
            self.retire(key, f"moved permanently to {target}", key)
        reason = self.sched.scope_reason(target, task.hops, task.seed_depth)
        if reason is not None:
            self.counters.inc(f"web.drop.redirect-{reason}")
            return
        self.sched.enqueue(target, hops=task.hops, seed_depth=task.seed_depth, via="redirect", origin=origin,
                           redirects=task.redirects + 1, front=True)

    # -- pages ------------------------------------------------------------------------------
    def _not_modified(self, task: Task, resp: Response) -> None:
        """304: unchanged; no body, no parse, no index write -- but its stored links are followed."""
        st = self.sched.done(task, resp, "not-modified")
        st.gone_count = st.fail_count = 0
        self.pipeline.not_modified(st.key, self.counts)
        links = self.sched.table.links_of(task.url)
        if task.kind == "requisite":  # a stylesheet's own requisites
            st.last_outcome = REQUISITE_OUTCOME
            self.sched.follow_requisites(links or [], task)
            self.sched.reschedule(st, UNCHANGED)
            return
        new = self.sched.follow(links, task) if links else 0
        self.sched.reschedule(st, CHANGED if new else UNCHANGED)

    def _head(self, task: Task, resp: Response) -> None:
        """LCWA: HEAD first for what does not look like HTML; GET only what we index."""
        v = head_verdict(task.url, resp.headers, self.src.max_size)
        if v.skip is None:
            self.sched.retry(replace(task, method="GET", front=True))  # the GET is part of the same page
            return
        st = self.sched.done(task, resp, v.skip)
        self.sched.reschedule(st, UNCHANGED)
        self.pipeline.skip(st.key, self.src.name, v.skip, v.detail, self.counts, size=v.size)

    def convert_mirrored_pages(self) -> None:
        """Rewrite the links of what the pass kept for offline browsing (``convert_links``):
        :meth:`~indexerd.sources.web.mirrorlinks.KeptForConversion.convert`."""
        self.kept_for_conversion.convert(self.pipeline.stored)

    def _page(self, task: Task, resp: Response) -> None:
        if task.kind == "requisite":
            self.requisites.answer(task, resp)
            return
        st = self.sched.done(task, resp, "fetched")
        st.gone_count = st.fail_count = 0
        if resp.error == "too-large":
            self.pipeline.skip(st.key, self.src.name, "too-large",
                               f"{task.url}: more than max_size {self.src.max_size} bytes", self.counts)
            st.last_outcome = "too-large"
            self.sched.reschedule(st, UNCHANGED)
            return
        refresh = instant_refresh(task.url, resp.headers)
        if refresh is not None:
            self._html_redirect(task, resp, st, refresh, None, "refresh-header")
            return
        directives = robots_directives(resp.headers.get("X-Robots-Tag"), self.src.token)
        f = Fetched(key=task.url, source=self.src.name, url=task.url, data=resp.body,
                    fetched_at=datetime.now(UTC), name=urlsplit(task.url).path or "/",
                    declared_type=resp.headers.get("Content-Type"), base_url=task.url,
                    protocol_date=resp.headers.get("Last-Modified"), protocol_kind="header",
                    server_date=resp.headers.get("Date"), sitemap_date=st.sitemap_lastmod,
                    size=len(resp.body), etag=resp.headers.get("ETag"),
                    last_modified_header=resp.headers.get("Last-Modified"))
        if "noindex" in directives:
            self._noindex(task, st, f, follow="nofollow" not in directives)
            return
        key = task.url
        old_key = st.doc_key
        self.duplicates.begin()
        def rekey(page: object) -> str | None:
            return self._canonical_key(page, key) if isinstance(page, PageLinks) else None

        out = self.pipeline.handle(f, self.src.pipeline_policy, self.counts, forced=self.sched.recrawl.forced,
                                   rekey=rekey, redirects=True, duplicate_of=self.duplicates.duplicate_of)
        if out.verdict is Verdict.REDIRECT and out.links is not None and out.links.redirect:
            self._html_redirect(task, resp, st, out.links.redirect, out.links.encoding)
            return
        if out.content_hash is not None and out.key is not None:
            for alias in self.duplicates.kept(out.key, out.content_hash):
                self.mirror.remove(alias)
        new_key = out.key or key
        if old_key and old_key != new_key and old_key != key and task.origin is None:
            self.retire(old_key, f"now indexed as {new_key}")
        st.doc_key = new_key
        if task.origin is not None:
            self.sched.state(task.origin).doc_key = new_key
        st.last_outcome = f"{Verdict(out.verdict).value}:{out.reason}"  # "indexed:new", not "Verdict.INDEXED:new"
        if out.verdict in ("indexed", "unchanged"):
            # HTML as extraction read it (a page served as application/octet-stream or with no
            # type is sniffed), not as its Content-Type says; decoded with the codec it was read in
            html = out.links is not None and out.links.media_type == MEDIA_HTML
            self.mirror.write(task.url, resp.body, out.last_modified, html=html)
            if html:
                charset = (out.links.encoding if out.links is not None else None) or \
                    content_charset(resp.headers.get("Content-Type") or "")
                self.kept_for_conversion.keep(task.url, charset, stylesheet=False)
                self.requisites.queue_for_page(task, resp, charset)
            else:
                self.requisites.kept_without_requisites(task)
        elif out.verdict in ("skipped", "errors"):
            self.mirror.remove(task.url)
        page = out.links
        new = 0
        if page is not None and not page.nofollow and "nofollow" not in directives:
            new = self._store_links(st, page, task)
        else:
            self.sched.table.set_links(task.url, None)
        self.sched.reschedule(st, FAILED if out.verdict == "errors" else
                              CHANGED if out.verdict == "indexed" or new else UNCHANGED)

    def _noindex(self, task: Task, st: UrlState, f: Fetched, *, follow: bool) -> None:
        """``X-Robots-Tag: noindex``: skipped (an indexed copy is replaced by the skip), its links
        followed unless ``nofollow``."""
        self.pipeline.skip(st.key, self.src.name, "noindex", "X-Robots-Tag noindex", self.counts, size=f.size,
                           etag=f.etag, last_modified_header=f.last_modified_header)
        self.mirror.remove(task.url)
        st.doc_key = task.url
        new = 0
        if follow:
            try:
                new = self._store_links(st, PageLinks.of(extract(f.data, f.declared_type, base_url=task.url,
                                                                 name=f.name)), task)
            except SkipDocument:  # not HTML: no links to follow
                pass
        self.sched.reschedule(st, CHANGED if new else UNCHANGED)

    def _store_links(self, st: UrlState, page: PageLinks, task: Task) -> int:
        """Keep a page's canonical outlinks and follow them; the count of never-seen URLs."""
        links = self.sched.links.canonical(page.links, page.encoding)
        self.sched.table.set_links(st.url, links)
        return self.sched.follow(links, task)

    @staticmethod
    def _canonical_key(page: PageLinks, key: str) -> str | None:
        """``rel=canonical`` on the same host names the document (RFC 6596 §3: a canonical
        link may point anywhere; only the same host is trusted here)."""
        if not page.canonical:
            return None
        try:
            c = canonicalize(page.canonical, page.encoding)
        except ValueError:
            return None
        return c if host_key(c) == host_key(key) else None
