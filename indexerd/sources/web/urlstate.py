"""What a crawl knows about one URL (a row of the state store's ``crawl`` table), typed.

:class:`UrlState` is the scheduler's record of one URL across passes: where it was found
(``via``, ``hops``, ``seed_depth``), what the last request taught (``last_status``,
``last_outcome``, ``gone_count``, ``fail_count``), which document it resolved to (``doc_key``)
and when it is next due (adaptive recrawl, :mod:`indexerd.sources.web.recrawl`).
:class:`PassState` is the resume point of a source's pass (its ``meta`` value).

Both are plain values: :mod:`indexerd.sources.web.crawltable` reads and writes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Literal

from indexerd.core.store import from_db_time, to_db_time

#: ``queued``: waiting in the frontier (or to be queued again by a resume); ``spilled``: the
#: frontier's overflow, on disk only; ``done``: asked in the row's pass.
Stage = Literal["queued", "spilled", "done"]
#: How the URL entered its pass: a seed, a page's link, a sitemap entry, a sitemap file itself,
#: a re-check of a URL known from an earlier pass, a redirect's target, or ``ctl reindex URL``.
Via = Literal["seed", "link", "sitemap", "sitemapfile", "recheck", "redirect", "reindex", "requisite"]


@dataclass(slots=True)
class UrlState:
    """One URL of a web source, as the crawl remembers it.

    Attributes:
        url: the canonical URL as requested (:func:`indexerd.sources.web.urls.canonicalize`).
        pass_id: the pass the fields below belong to.
        state: see :data:`Stage`.
        hops: links followed from a seed to reach it (redirect hops keep the first URL's).
        seed_depth: path depth of that seed (LCWA ``+N`` / ``-N`` depth specs).
        seq: discovery order within the pass.
        via: see :data:`Via`.
        origin: for a redirect's target, the URL first requested; else None.
        redirects: redirect hops (HTTP and HTML) from ``origin`` to here.
        doc_key: the document key it resolved to (None: not fetched yet, or the URL itself).
        sitemap_lastmod: the sitemap's ``<lastmod>`` text as written, or None.
        gone_count: 404/410 answers in a row.
        fail_count: 5xx answers, timeouts and connection errors in a row.
        last_status: HTTP status of the last answer, 0 for no answer, None if never asked.
        last_outcome: one word (``fetched``, ``not-modified``, ``gone``, ``redirect-301``,
            ``indexed:new`` ...) for ``ctl explain`` and the next pass.
        checked_at: when it was last asked (aware UTC), or None.
        recrawl_seconds: the adaptive recrawl interval learnt, or None before the first fetch.
        due_at: when it is next due (aware UTC); None is due.
        due_reason: why ``due_at`` (one line).
        changefreq: the sitemap's ``<changefreq>`` word, or None.
    """

    url: str
    pass_id: int = 0
    state: Stage = "queued"
    hops: int = 0
    seed_depth: int = 1
    seq: int = 0
    via: Via = "link"
    origin: str | None = None
    redirects: int = 0
    doc_key: str | None = None
    sitemap_lastmod: str | None = None
    gone_count: int = 0
    fail_count: int = 0
    last_status: int | None = None
    last_outcome: str | None = None
    checked_at: datetime | None = None
    recrawl_seconds: float | None = None
    due_at: datetime | None = None
    due_reason: str | None = None
    changefreq: str | None = None

    @property
    def key(self) -> str:
        """The document key this URL stands for: ``doc_key``, else the URL itself."""
        return self.doc_key or self.url

    @property
    def asked_before(self) -> bool:
        """A page (not a sitemap file) requested in some pass and not confirmed gone: a new
        pass asks it again (conditionally) when it is due."""
        return self.last_status is not None and self.via != "sitemapfile" and self.last_outcome != "gone"

    @classmethod
    def from_row(cls, row) -> UrlState:
        """From a store row (a mapping with every column of :data:`COLUMNS`; times as the store's
        text, :func:`indexerd.core.store.to_db_time`)."""
        values = {c: row[c] for c in COLUMNS}
        values["checked_at"] = from_db_time(values["checked_at"])
        values["due_at"] = from_db_time(values["due_at"])
        return cls(**values)

    def as_row(self) -> dict:
        """The store row of this state: ``{column: value}``, times as the store's text."""
        row = {c: getattr(self, c) for c in COLUMNS}
        row["checked_at"] = to_db_time(self.checked_at)
        row["due_at"] = to_db_time(self.due_at)
        return row


#: The ``crawl`` table's columns that :class:`UrlState` holds, in field order (``links``,
#: kilobytes per page, is read only when a 304 needs it).
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(UrlState))


@dataclass(frozen=True, slots=True)
class PassState:
    """The resume point of a source's crawl (the ``web:<source>:pass`` meta value).

    Attributes:
        id: the pass number (1 for the first; 0 before any).
        running: True while the pass is under way (a restart resumes it), False once finished.
        started: when the pass began (aware UTC); adaptive recrawl schedules from it.
        forced: a ``ctl reindex --source`` pass (no validators sent; a resume stays forced).
        recheck: a ``ctl crawl NAME --all`` pass (every known page asked, with its validators;
            a resume asks the rest).
    """

    id: int = 0
    running: bool = False
    started: datetime | None = None
    forced: bool = False
    recheck: bool = False

    @classmethod
    def from_json(cls, text: str | None) -> PassState:
        """From the stored JSON (``{"id", "state": "running"|"finished", "started", "forced",
        "recheck"}``); None or ``{}`` is :class:`PassState` () (no pass yet)."""
        d = json.loads(text or "{}")
        return cls(id=int(d.get("id", 0)), running=d.get("state") == "running",
                   started=from_db_time(d.get("started")), forced=bool(d.get("forced")),
                   recheck=bool(d.get("recheck")))

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "state": "running" if self.running else "finished",
                           "started": to_db_time(self.started), "forced": self.forced,
                           "recheck": self.recheck})
