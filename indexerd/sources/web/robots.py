"""robots.txt per RFC 9309, parsed by protego, cached per host until it expires.

Outside contracts relied on:

- ``protego.Protego`` 0.7 implements RFC 9309 matching (longest match wins, ``Allow`` wins a tie,
  ``*`` and ``$``, groups for one user agent merged) and parses a fractional
  ``Crawl-delay``.  It matches the user agent we pass against the groups, so we always pass the
  product token (``indexerd``), never the full User-Agent header.  It takes ``str``: decoding is
  ours.  A BOM would become part of the first line and lose the first group, so bytes
  are decoded as ``utf-8-sig`` with ``errors="replace"``.
- protego itself always allows ``/robots.txt``.

What RFC 9309 leaves to the crawler, decided here:

- §2.3.1.2 redirects: up to five consecutive redirects are followed, by :func:`follow_redirects`
  (the one loop, run by the crawler's workers), each hop through
  the caller's ``get`` (politeness) and only to a target the caller's ``follow`` admits (the
  crawler: the source's site, its hosts and ports).  A redirect still there after that, or to a
  non-http(s) URL or a target not admitted, is treated as "unavailable", i.e. allow-all (what the
  RFC permits and Google does).
- §2.3.1.3 a 4xx (400-499 except 429) means "unavailable": everything may be fetched.
- §2.3.1.4 a 5xx, a 429, a timeout or a connection error means "unreachable": nothing may be
  fetched.  Such an entry expires after ``unreachable_ttl`` (5 min) so the next pass retries.
- §2.4 a result is cached at most 24 hours.
- §2.5 at least 500 KiB must be parsed: a longer file is cut at the last line boundary within
  :data:`MAX_ROBOTS_BYTES` and the rest ignored (fetch it with ``truncate=True``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protego import Protego

from indexerd.sources.web.httpresponse import Response

__all__ = [
    "MAX_REDIRECT_HOPS",
    "follow_redirects",
    "MAX_ROBOTS_BYTES",
    "MAX_TTL",
    "SHARED",
    "SharedRobots",
    "UNREACHABLE_TTL",
    "RobotsCache",
    "RobotsRules",
    "parse_robots",
]

#: RFC 9309 §2.5: parse at least 500 KiB; we parse exactly that much (cut at a line boundary).
MAX_ROBOTS_BYTES = 500 * 1024
#: RFC 9309 §2.3.1.2: follow at least five consecutive redirects.
MAX_REDIRECT_HOPS = 5
#: RFC 9309 §2.4: do not use a cached robots.txt for more than 24 hours.
MAX_TTL = 86400.0
#: How long an 'unreachable' verdict is kept before the next attempt (seconds).
UNREACHABLE_TTL = 300.0

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[A-Za-z_-]+")  # RFC 9309 §2.2.1 product token
_HTTP_SCHEMES = ("http", "https")


def _cut(data: bytes, limit: int = MAX_ROBOTS_BYTES) -> bytes:
    """``data`` cut to at most ``limit`` bytes, at the last line end within the limit."""
    if len(data) <= limit:
        return data
    head = data[:limit]
    end = max(head.rfind(b"\n"), head.rfind(b"\r"))
    return head[:end + 1] if end >= 0 else head


def parse_robots(data: bytes, token: str = "indexerd") -> tuple[Protego, float | None, tuple[str, ...]]:
    """Parse robots.txt bytes: ``(parser, crawl_delay for token in seconds or None, sitemaps)``.

    Decodes as ``utf-8-sig`` with ``errors='replace'`` (a BOM must not eat the first group);
    bytes past :data:`MAX_ROBOTS_BYTES` are ignored, cut at a line boundary
    (RFC 9309 §2.5).  ``sitemaps`` are the ``Sitemap:`` values in file order, as written.
    """
    text = _cut(data).decode("utf-8-sig", errors="replace")
    parser = Protego.parse(text)
    return parser, parser.crawl_delay(token), tuple(parser.sitemaps)


def follow_redirects(url: str, get: Callable[[str], Response], follow: Callable[[str], bool] | None = None
                     ) -> tuple[Response, int]:
    """Request robots.txt at ``url`` and follow its redirects: ``(final response, hops followed)``.

    At most :data:`MAX_REDIRECT_HOPS` hops (RFC 9309 §2.3.1.2), each to an http(s) ``Location``
    that ``follow(target)`` admits (None: any); a redirect not followed is the final response
    (:meth:`RobotsCache.put_response` makes it ``'allow-all'``).  ``get(url)`` does one request
    (through politeness; ``max_size=MAX_ROBOTS_BYTES, truncate=True``); a response with an
    ``error`` ends the loop.
    """
    resp = get(url)
    hops = 0
    while (resp.is_redirect and hops < MAX_REDIRECT_HOPS and resp.location is not None
           and urlsplit(resp.location).scheme.lower() in _HTTP_SCHEMES
           and (follow is None or follow(resp.location))):
        hops += 1
        resp = get(resp.location)
    return resp, hops


@dataclass(frozen=True)
class RobotsRules:
    """One host's robots.txt verdict.

    Attributes:
        status: ``'ok'`` (parsed), ``'allow-all'`` (4xx or too many redirects: RFC 9309
            §2.3.1.3), ``'unreachable'`` (5xx, 429, timeout, connection error: nothing may be
            fetched, §2.3.1.4).
        fetched_at: ``time.monotonic()`` seconds when the verdict was made.
        expires_at: ``fetched_at`` + ttl (monotonic; at most 24 h later, §2.4).
        crawl_delay: ``Crawl-delay`` for our token in seconds, or None.
        sitemaps: ``Sitemap:`` URLs as written.
        token: the product token matched against the groups.
        detail: why this status (HTTP status or error word), for the log.
    """

    status: str
    fetched_at: float
    expires_at: float
    crawl_delay: float | None = None
    sitemaps: tuple[str, ...] = ()
    token: str = "indexerd"
    detail: str = ""
    parser: Protego | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_bytes(cls, data: bytes, *, token: str = "indexerd", fetched_at: float | None = None,
                   ttl: float = MAX_TTL) -> RobotsRules:
        """Rules parsed from a robots.txt body (see :func:`parse_robots`), status ``'ok'``."""
        now = time.monotonic() if fetched_at is None else fetched_at
        parser, delay, sitemaps = parse_robots(data, token)
        return cls("ok", now, now + min(ttl, MAX_TTL), delay, sitemaps, token, "200", parser)

    def allowed(self, url: str) -> bool:
        """May ``url`` (on this rules' host) be fetched?  ``/robots.txt`` itself always may;
        ``'unreachable'`` allows nothing else, ``'allow-all'`` everything."""
        if urlsplit(url).path == "/robots.txt":
            return True
        if self.status == "allow-all":
            return True
        if self.status != "ok" or self.parser is None:
            return False
        return self.parser.can_fetch(url, self.token)

    def expired(self, now: float | None = None) -> bool:
        """True once ``expires_at`` has passed (monotonic seconds)."""
        return (time.monotonic() if now is None else now) >= self.expires_at


class RobotsCache:
    """robots.txt verdicts per host key (``'scheme://host:port'``, see ``indexerd.sources.web.urls.host_key``).

    Each verdict is kept until it expires: ``ttl`` seconds (capped at 24 h, RFC 9309 §2.4) for
    ``'ok'`` and ``'allow-all'``, ``unreachable_ttl`` seconds for ``'unreachable'``.
    Thread-safe.  Fetching is the caller's: the crawl's frontier hands a host's robots.txt to one
    worker at a time, which follows its redirects (:func:`follow_redirects`) and stores the final
    answer with :meth:`put_response`.

    Args:
        token: the product token (letters, ``_``, ``-``; RFC 9309 §2.2.1), not the User-Agent.
        clock: monotonic seconds (tests may inject one).

    Raises:
        ValueError: ``token`` is not a product token (e.g. a full User-Agent string).
    """

    def __init__(self, token: str = "indexerd", ttl: float = MAX_TTL, *, unreachable_ttl: float = UNREACHABLE_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not _TOKEN.fullmatch(token):
            raise ValueError(f"robots.txt product token must be letters, '_' or '-', got {token!r}")
        self.token = token
        self.ttl = min(float(ttl), MAX_TTL)
        self.unreachable_ttl = float(unreachable_ttl)
        self._clock = clock
        self._rules: dict[str, RobotsRules] = {}
        self._lock = threading.Lock()

    def get(self, host: str) -> RobotsRules | None:
        """The verdict for ``host``, or None when not known yet or expired.  In a cluster
        (:data:`SHARED`), a verdict another node (or source) fetched is taken from the shared
        store before the host's robots.txt is asked again."""
        with self._lock:
            rules = self._rules.get(host)
        if rules is None or rules.expired(self._clock()):
            rules = self._shared_verdict(host) if SHARED.store is not None else None
        return rules

    def _shared_verdict(self, host: str) -> RobotsRules | None:
        found = SHARED.get(host)
        if found is None:
            return None
        status, body, detail, left = found
        now = self._clock()
        if status == "ok":
            rules = RobotsRules.from_bytes(body or b"", token=self.token, fetched_at=now, ttl=left)
        else:
            rules = RobotsRules(status, now, now + left, token=self.token, detail=detail)
        with self._lock:
            self._rules[host] = rules
        return rules

    def put_response(self, host: str, resp: Response, *, hops: int | None = None) -> RobotsRules:
        """Turn the final response for ``/robots.txt`` into a verdict, store it and return it.

        The caller follows redirects itself first, up to :data:`MAX_REDIRECT_HOPS` of them, each
        through politeness (:func:`follow_redirects`).  A redirect that still reaches this
        method means the caller stopped following: RFC 9309 §2.3.1.2 lets the crawler then assume
        the file is unavailable, so it is ``'allow-all'``, like any other 3xx.  ``hops`` (how many
        redirects were followed, if known) only goes into ``detail``.

        2xx -> parsed (``'ok'``); 3xx -> ``'allow-all'``; 4xx except 429 -> ``'allow-all'``
        (§2.3.1.3); 429, 5xx, any ``resp.error`` (a ``'too-large'`` body included: fetch
        robots.txt with ``truncate=True``) or no status -> ``'unreachable'`` (§2.3.1.4).
        Never raises.
        """
        now = self._clock()
        status = resp.status
        if resp.error is not None or status is None:
            rules = RobotsRules("unreachable", now, now + self.unreachable_ttl, token=self.token,
                                detail=resp.error or "no response")
        elif 200 <= status < 300:
            rules = RobotsRules.from_bytes(resp.body, token=self.token, fetched_at=now, ttl=self.ttl)
        elif 300 <= status < 400:
            if resp.is_redirect:
                log.info("robots.txt of %s still redirects (%s) after %s hops: allow-all", host, resp.location,
                         "?" if hops is None else hops)
            detail = f"{status} after {'?' if hops is None else hops} redirects" if resp.is_redirect else str(status)
            rules = RobotsRules("allow-all", now, now + self.ttl, token=self.token, detail=detail)
        elif 400 <= status < 500 and status != 429:
            rules = RobotsRules("allow-all", now, now + self.ttl, token=self.token, detail=str(status))
        else:
            rules = RobotsRules("unreachable", now, now + self.unreachable_ttl, token=self.token, detail=str(status))
        with self._lock:
            self._rules[host] = rules
        if SHARED.store is not None:
            SHARED.put(host, rules.status, _cut(resp.body) if rules.status == "ok" else None, rules.detail,
                       rules.expires_at - now)
        return rules


class SharedRobots:
    """robots.txt verdicts in a cluster's shared store (``store``: a connection of its own, set
    by the indexer when the store is shared; None on one machine), so that a host's robots.txt
    is fetched once per expiry for every node and source.  A store that cannot be reached only
    means asking the host again: errors are logged once a minute and never raised."""

    def __init__(self) -> None:
        self.store = None
        self._lock = threading.Lock()
        self._last_error = 0.0

    def _failed(self, e: Exception) -> None:
        if time.monotonic() - self._last_error > 60:
            log.warning("shared robots.txt verdicts: %s", e)
        self._last_error = time.monotonic()

    def get(self, host: str):
        from indexerd.core.errors import IndexerdError

        with self._lock:
            store = self.store
            if store is None:
                return None
            try:
                return store.robots_get(host)
            except IndexerdError as e:
                self._failed(e)
                return None

    def put(self, host: str, status: str, body: bytes | None, detail: str, ttl: float) -> None:
        from indexerd.core.errors import IndexerdError

        with self._lock:
            store = self.store
            if store is None:
                return
            try:
                store.robots_put(host, status, body, detail, max(ttl, 0.0))
            except IndexerdError as e:
                self._failed(e)


#: The process's shared verdicts (``SHARED.store`` is set in a cluster).
SHARED = SharedRobots()
