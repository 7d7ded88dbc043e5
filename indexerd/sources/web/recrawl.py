"""Adaptive recrawl: when a web page is asked again, learnt from its own history.

The rule is Nutch's ``AdaptiveFetchSchedule`` (``db.fetch.schedule.adaptive.*``): each page
keeps a recrawl interval; a fetch that finds it changed multiplies the interval by
``1 - DEC_RATE``, a fetch that finds it unchanged by ``1 + INC_RATE``, and the interval stays
between the site's ``interval`` (the time between passes) and ``max_recrawl_interval``.  A pass
asks only the pages that are due, plus new URLs.  Nutch's ``sync_delta`` (shifting the next
fetch by the page's age) is not used: a wrong ``Last-Modified`` would push a page to the maximum
at once.

What keeps new pages found (the part a page's own history does not cover):

- seeds are asked at every pass, as are sitemaps (a new URL in a sitemap is crawled at once, and
  a ``<lastmod>`` later than a page's last check makes that page due now);
- a fetch whose links lead to a URL never seen before counts as a change (a hub page, like a
  "what's new" list, is asked as often as it yields new pages);
- a failed fetch (5xx, timeout, 4xx, a 404 not yet confirmed) keeps the interval learnt and asks
  again at the next pass.

A sitemap ``<changefreq>`` (sitemaps.org protocol) gives a page's first interval, within the same
bounds; without one, a new page starts at the site's ``interval``.

Everything here is pure: times in, times out (aware UTC datetimes, seconds as floats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

#: Nutch's defaults (``db.fetch.schedule.adaptive.inc_rate`` / ``dec_rate``); Nutch warns that
#: rates above 0.4 make the interval swing with little relation to the page's changes.
INC_RATE = 0.2
DEC_RATE = 0.2

#: sitemaps.org ``<changefreq>`` words -> seconds (``always``: as often as allowed; ``never``:
#: archived pages, as rarely as allowed).
CHANGEFREQ_SECONDS = {
    "always": 0.0, "hourly": 3600.0, "daily": 86400.0, "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0, "yearly": 365 * 86400.0, "never": math.inf,
}

#: What a fetch taught about a page.
CHANGED, UNCHANGED, FAILED = "changed", "unchanged", "failed"


@dataclass(frozen=True)
class Schedule:
    """A page's recrawl interval (seconds), when it is next due (aware UTC), and why (one line
    for ``ctl explain``)."""

    interval_seconds: float
    due_at: datetime
    reason: str


def _bounded(seconds: float, low: float, high: float) -> float:
    return min(max(seconds, low), high)


def next_schedule(interval_seconds: float | None, change: str, checked_at: datetime, *,
                  min_interval: float, max_interval: float, changefreq: str | None = None,
                  seed: bool = False) -> Schedule:
    """The schedule after one fetch of a page.

    Args:
        interval_seconds: the page's interval before this fetch; None for a page without one
            (new, or known from before adaptive recrawl).
        change: :data:`CHANGED` (new content, or links to URLs never seen), :data:`UNCHANGED`
            (304, same content, same redirect, same skip) or :data:`FAILED`.
        checked_at: the start of the pass that fetched it (aware UTC): passes that start
            ``min_interval`` apart then find the page due on time.
        min_interval: the site's ``interval`` (seconds, > 0).
        max_interval: ``max_recrawl_interval`` (seconds, >= ``min_interval``).
        changefreq: the sitemap's ``<changefreq>`` for the page (any case), used for its first
            interval only; an unknown word is ignored.
        seed: a seed is asked at every pass whatever it did.

    Returns:
        The new :class:`Schedule`; ``due_at = checked_at + interval`` (a failure: the next pass).
    """
    if seed:
        return Schedule(min_interval, checked_at + timedelta(seconds=min_interval), "seed: asked every pass")
    if interval_seconds is None:
        freq = (changefreq or "").strip().lower()
        hint = CHANGEFREQ_SECONDS.get(freq)
        if hint is not None:
            interval = _bounded(hint, min_interval, max_interval)
            why = f"first fetch: sitemap changefreq {freq}"
        else:
            interval = min_interval
            why = "first fetch: the site's interval"
        if change == FAILED:
            return Schedule(interval, checked_at + timedelta(seconds=min_interval),
                            "failed: asked again at the next pass")
        return Schedule(interval, checked_at + timedelta(seconds=interval), why)
    old = _bounded(interval_seconds, min_interval, max_interval)
    if change == FAILED:
        return Schedule(old, checked_at + timedelta(seconds=min_interval), "failed: asked again at the next pass")
    if change == CHANGED:
        factor = 1 - DEC_RATE
    elif change == UNCHANGED:
        factor = 1 + INC_RATE
    else:
        raise ValueError(f"change must be one of {CHANGED!r}, {UNCHANGED!r}, {FAILED!r}, got {change!r}")
    raw = old * factor
    interval = _bounded(raw, min_interval, max_interval)
    why = f"{change}: interval x{factor:g}"
    if interval > raw:
        why += " (the site's interval is the least)"
    elif interval < raw:
        why += " (max_recrawl_interval is the most)"
    return Schedule(interval, checked_at + timedelta(seconds=interval), why)


def is_due(due_at: datetime | None, pass_start: datetime, min_interval: float) -> bool:
    """True when a page due at ``due_at`` is asked in the pass starting at ``pass_start``.

    None (never scheduled: a page known from before adaptive recrawl) is due.  A page due up to
    half a site ``interval`` after the pass starts is asked now: passes come one ``interval``
    apart (with jitter), and the nearest pass is the one that keeps it on time.
    """
    return due_at is None or due_at <= pass_start + timedelta(seconds=min_interval / 2)


@dataclass
class PassRecrawl:
    """Adaptive recrawl in one pass of one web source: which known URLs the pass asks, and when
    each is due next after a fetch.

    ``pass_start`` is the pass's start (aware UTC; set again when a stopped pass resumes);
    ``min_interval`` and ``max_interval`` are the source's ``interval`` and
    ``max_recrawl_interval`` in seconds; ``forced`` (``ctl reindex``) and ``recheck``
    (``ctl crawl NAME --all``) make every known URL due.  Not thread-safe: the thread that runs
    the pass uses it.
    """

    pass_start: datetime
    min_interval: float
    max_interval: float
    forced: bool = False
    recheck: bool = False

    def all_due(self) -> bool:
        """Whether every URL asked before is due in this pass: a forced or recheck pass, or
        adaptive recrawl off (``max_recrawl_interval`` no more than ``interval``)."""
        return self.forced or self.recheck or self.max_interval <= self.min_interval

    def due(self, due_at: datetime | None) -> bool:
        """Whether a known URL due at ``due_at`` (None: never scheduled) is asked in this pass
        (:meth:`all_due`, else :func:`is_due`)."""
        return self.all_due() or is_due(due_at, self.pass_start, self.min_interval)

    def next(self, interval_seconds: float | None, change: str, changefreq: str | None,
             seed: bool) -> Schedule:
        """:func:`next_schedule` of one fetch in this pass, within the source's bounds."""
        return next_schedule(interval_seconds, change, self.pass_start, min_interval=self.min_interval,
                             max_interval=self.max_interval, changefreq=changefreq, seed=seed)
