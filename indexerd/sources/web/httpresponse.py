"""What one HTTP request gave (:class:`Response`): status, headers, body or a fixed error word; and
Retry-After read as seconds (:func:`parse_retry_after`).

:class:`~indexerd.sources.web.fetch.Fetcher` makes them; the crawl's response handlers
(:mod:`indexerd.sources.web.responses`) read them.  Whenever ``error`` is set the body is empty.
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["ERRORS", "REDIRECT_STATUSES", "Response", "parse_retry_after"]

#: The fixed error words of :attr:`Response.error`.
ERRORS = ("timeout", "connection", "ssl", "too-large", "bad-encoding", "too-slow", "protocol", "cancelled",
          "paused")

#: The statuses that redirect (RFC 9110 §15.4): 301, 302, 303, 307, 308.
REDIRECT_STATUSES = (301, 302, 303, 307, 308)


@dataclass
class Response:
    """What one request gave.

    Attributes:
        url: the URL requested (not a redirect target).
        method: ``"GET"`` or ``"HEAD"``.
        status: the HTTP status, or None when no response arrived (then ``error`` says why).
        headers: case-insensitive (requests' ``CaseInsensitiveDict``); empty when no response
            arrived.  Kept for errors after the headers (``too-large``, ``too-slow``, ...).
        body: the body decoded from its Content-Encoding, at most ``max_size`` bytes; always
            empty when ``error`` is set, and for HEAD.
        elapsed: seconds from sending the request to the end of the body (or the failure).
        error: None, or one of :data:`ERRORS`.
        detail: free text for the log.
        location: for a 301/302/303/307/308 with a Location header, that header resolved
            against ``url`` (absolute); else None.
        retry_after: seconds from Retry-After (delta-seconds or HTTP-date, RFC 9110 §10.2.3),
            never negative; None when absent or unparsable.
        truncated: True when ``fetch(truncate=True)`` cut the body at ``max_size``.
    """

    url: str
    method: str
    status: int | None
    headers: Mapping[str, str]
    body: bytes
    elapsed: float
    error: str | None = None
    detail: str = ""
    location: str | None = None
    retry_after: float | None = None
    truncated: bool = field(default=False)

    @property
    def not_modified(self) -> bool:
        """The server answered 304 Not Modified (RFC 9110 §15.4.5)."""
        return self.status == 304

    @property
    def is_redirect(self) -> bool:
        """A 301, 302, 303, 307 or 308 with a usable Location."""
        return self.status in REDIRECT_STATUSES and self.location is not None

    @property
    def permanent_redirect(self) -> bool:
        """A 301 or 308 (RFC 9110 §15.4.2, §15.4.9): the crawler may replace the stored URL."""
        return self.status in (301, 308)


def parse_retry_after(value: str | None, *, date: str | None = None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (RFC 9110 §10.2.3), or None.

    ``value`` is delta-seconds (``"120"``) or an HTTP-date.  A date is measured against the
    response's ``Date`` header when that parses (so client clock skew does not matter), else
    against ``now`` (aware UTC; default: the current time).  A date in the past gives 0.0;
    garbage gives None.  Naive dates are taken as UTC.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(int(value))
    when = _http_date(value)
    if when is None:
        return None
    ref = _http_date(date) if date else None
    if ref is None:
        ref = now if now is not None else datetime.now(UTC)
        if ref.tzinfo is None:
            ref = ref.replace(tzinfo=UTC)
    return max(0.0, (when - ref).total_seconds())


def _http_date(value: str) -> datetime | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
