"""What a pass does with a page requisite's answer (a stylesheet, an image, a script kept in the
mirror, never indexed), and the requisites an HTML page it kept asks for
(:mod:`indexerd.sources.web.requisites` reads them from the bytes).
"""

from __future__ import annotations

import logging

from indexerd.core.counts import PassCounts
from indexerd.core.dates import parse_date
from indexerd.pipeline.stages import Pipeline
from indexerd.sources.web.frontier import Task
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.mirror import PassMirror
from indexerd.sources.web.mirrorlinks import KeptForConversion
from indexerd.sources.web.recrawl import CHANGED, UNCHANGED
from indexerd.sources.web.requisites import OUTCOME as REQUISITE_OUTCOME
from indexerd.sources.web.requisites import content_charset, css_requisites, html_requisites, is_stylesheet
from indexerd.sources.web.scheduler import Scheduler

log = logging.getLogger(__name__)


class RequisiteAnswers:
    """Applies the answers to one pass's requisite requests (used by the pass's thread only).

    Args:
        sched: the pass's scheduler.
        pipeline: the document pipeline (a requisite is recorded skipped, with its validators).
        counts: the pass's counts.
        mirror: the pass's mirror.
        kept_for_conversion: what the pass kept, for ``convert_links``.
    """

    def __init__(self, sched: Scheduler, pipeline: Pipeline, counts: PassCounts, mirror: PassMirror,
                 kept_for_conversion: KeptForConversion) -> None:
        self.sched = sched
        self.src = sched.src
        self.pipeline = pipeline
        self.counts = counts
        self.counters = pipeline.counters
        self.mirror = mirror
        self.kept_for_conversion = kept_for_conversion

    def answer(self, task: Task, resp: Response) -> None:
        """A page requisite's 200: kept in the mirror (its Last-Modified as the file's time),
        recorded skipped ``requisite`` with its validators (the next ask is conditional), never
        indexed; a stylesheet's own requisites are queued and remembered as its links."""
        st = self.sched.done(task, resp, REQUISITE_OUTCOME)
        st.gone_count = st.fail_count = 0
        st.last_outcome = REQUISITE_OUTCOME
        ctype = resp.headers.get("Content-Type") or ""
        if resp.error == "too-large":
            self.mirror.remove(task.url)
            self.pipeline.skip(st.key, self.src.name, "too-large",
                               f"{task.url}: more than max_size {self.src.max_size} bytes", self.counts)
            self.sched.reschedule(st, UNCHANGED)
            return
        last_modified = resp.headers.get("Last-Modified")
        self.mirror.write(task.url, resp.body, parse_date(last_modified) if last_modified else None)
        self.pipeline.skip(st.key, self.src.name, REQUISITE_OUTCOME,
                           f"{task.url}: a page requisite, kept in the mirror", self.counts,
                           size=len(resp.body), etag=resp.headers.get("ETag"),
                           last_modified_header=last_modified)
        self.counters.inc("web.requisite.kept")
        if is_stylesheet(task.url, ctype):
            urls = css_requisites(resp.body, content_charset(ctype), task.url)
            self.sched.table.set_links(task.url, urls)
            self.sched.table.set_requisites(task.url, urls, nested=True)
            self.sched.follow_requisites(urls, task)
            self.kept_for_conversion.keep(task.url, content_charset(ctype), stylesheet=True)
        else:
            self.sched.table.set_requisites(task.url, None)
        changed = task.etag is not None or task.last_modified is not None  # asked conditionally, sent whole
        self.sched.reschedule(st, CHANGED if changed else UNCHANGED)

    def queue_for_page(self, task: Task, resp: Response, charset: str | None) -> None:
        """Queue what an HTML page kept in the mirror needs to display (``page_requisites``), and
        remember it as the page's requisites (replacing those of its last parse: a requisite
        no page references any more is dropped, :mod:`indexerd.sources.web.orphans`).  A page
        the parser cannot read keeps the requisites recorded before (never drop what may be
        needed)."""
        if not self.src.scope.requisites:
            return
        try:
            urls = html_requisites(resp.body, charset, task.url)
        except Exception:  # noqa: BLE001 - a page the parser cannot read has no requisites
            log.debug("%s: no requisites read from %s", self.src.name, task.url, exc_info=True)
            return
        self.sched.table.set_requisites(task.url, urls)
        self.sched.follow_requisites(urls, task)

    def kept_without_requisites(self, task: Task) -> None:
        """A page kept in the mirror that is not HTML (a PDF): it needs no requisite (it may
        have been an HTML page that did)."""
        if self.src.scope.requisites:
            self.sched.table.set_requisites(task.url, None)
