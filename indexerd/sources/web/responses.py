"""Pure response handlers: what one answer means for one URL, as a verdict.

Like Scrapy's downloader middlewares (``scrapy/downloadermiddlewares/redirect.py``,
``retry.py``: https://github.com/scrapy/scrapy), each handler takes the request (a
:class:`~indexerd.sources.web.frontier.Task`), the :class:`~indexerd.sources.web.httpresponse.Response`
and what the crawl knows of the URL (:class:`~indexerd.sources.web.urlstate.UrlState`) and
returns a value saying what to do; the pass (:mod:`indexerd.sources.web.answers`) applies it: the
pipeline, the mirror, the frontier.  Nothing here does I/O, so every rule is tested without a
server (``tests/test_web_handlers.py``).

The status policy (:func:`status_verdict`), for a page request:

- a transport error (timeout, connection, too slow ...): ``failed``, the indexed copy is kept;
- 304: ``not-modified``; a redirect with a usable Location: ``redirect``;
- 405 / 501 to a HEAD: ``get`` (ask again with GET: the server does not do HEAD);
- 404 / 410: ``gone`` (deleted after ``gone_after`` in a row: :func:`gone_verdict`);
- 429 / 503: ``retry`` later in the pass, at most :data:`MAX_RETRY_AFTER_ATTEMPTS` requests in all,
  then ``failed``; any other 5xx: ``failed``;
- any other status outside 2xx (401, 403, 1xx, 3xx without Location ...): ``refused`` (the
  indexed copy is kept: not a confirmed deletion);
- 2xx to a HEAD: ``head`` (:func:`head_verdict`); 2xx to a GET: ``page``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal
from urllib.parse import urljoin, urlsplit

from indexerd.core.dates import check_plausible, parse_date
from indexerd.extract import guess_media_type, parse_refresh
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Task
from indexerd.sources.web.urls import canonicalize
from indexerd.sources.web.urlstate import UrlState

#: Redirect hops (HTTP and HTML together) followed from one URL before it is a ``redirect-loop``.
MAX_REDIRECTS = 10
#: Requests of one URL answered 429 / 503 in a pass before it is given up for this pass.
MAX_RETRY_AFTER_ATTEMPTS = 3
#: Skip reasons that depend only on the bytes: a page skipped for one of them is asked with a
#: conditional GET next time (a 304 keeps the verdict) instead of being downloaded again.
#: ``too-large`` is not one: raising ``max_size`` must fetch it again.
SKIPS_BY_CONTENT = frozenset({"binary", "unsupported-type", "empty", "noindex"})
#: Path extensions that are (or produce) HTML: fetched with GET straight away.  Any other
#: extension is asked with HEAD first (LCWA), and fetched only if its type is indexed.
HTML_EXTENSIONS = frozenset({"", ".html", ".htm", ".xhtml", ".shtml", ".php", ".asp", ".aspx",
                             ".jsp", ".cgi", ".pl", ".txt", ".md"})

Action = Literal["cancelled", "invalid", "failed", "not-modified", "redirect", "get", "retry", "gone",
                 "refused", "head", "page"]


@dataclass(frozen=True)
class StatusVerdict:
    """What the status of an answer to a page request means.

    Attributes:
        action: see the module docstring.
        reason: the counter word for ``failed`` / ``gone`` / ``refused`` / ``retry`` / ``get``
            (``timeout``, ``http-404``, ``http-503`` ...) or ``redirect`` (``redirect-301``); else empty.
        retry: for ``retry`` and ``get``, the task to queue again (its request does not spend the
            page budget): a 429 / 503 in its place with one more attempt (after the host's
            Retry-After delay), a GET after a HEAD at the front of its host's queue.
    """

    action: Action
    reason: str = ""
    retry: Task | None = None


def status_verdict(task: Task, resp: Response) -> StatusVerdict:
    """The status policy for the answer ``resp`` to the page request ``task`` (module docstring).

    A ``too-large`` body is a ``page`` (its handler skips it, the indexed copy kept).
    """
    if resp.error == "cancelled":  # the stop cut the request: nothing learnt, it stays queued
        return StatusVerdict("cancelled")
    if resp.error == "invalid-url":
        return StatusVerdict("invalid")
    if resp.error is not None and resp.error != "too-large":
        return StatusVerdict("failed", resp.error)
    if resp.not_modified:
        return StatusVerdict("not-modified")
    if resp.is_redirect:
        return StatusVerdict("redirect", f"redirect-{resp.status}")
    status = resp.status
    assert status is not None  # a response without an error has a status
    if task.method == "HEAD" and status in (405, 501):
        return StatusVerdict("get", f"http-{status}", replace(task, method="GET", front=True))
    if status in (404, 410):
        return StatusVerdict("gone", f"http-{status}")
    if status in (429, 503) or status >= 500:
        if status in (429, 503) and task.attempts + 1 < MAX_RETRY_AFTER_ATTEMPTS:
            return StatusVerdict("retry", f"http-{status}", replace(task, attempts=task.attempts + 1))
        return StatusVerdict("failed", f"http-{status}")
    if status < 200 or status >= 300:
        return StatusVerdict("refused", f"http-{status}")
    return StatusVerdict("head" if task.method == "HEAD" else "page")


@dataclass(frozen=True)
class GoneVerdict:
    """A 404 / 410: the URL's new ``gone_count`` and whether that confirms the deletion."""

    gone_count: int
    confirmed: bool


def gone_verdict(state: UrlState, gone_after: int) -> GoneVerdict:
    """Only ``gone_after`` 404/410 answers in a row delete a page (one may be a server's hiccup)."""
    count = state.gone_count + 1
    return GoneVerdict(count, count >= gone_after)


@dataclass(frozen=True)
class RedirectVerdict:
    """Where a redirect leads.

    Attributes:
        target: the canonical target to queue (at the front, with the hops of the URL first
            requested), or None when it is not followed.
        failure: None, ``bad-redirect`` (the Location is no crawlable URL) or ``redirect-loop``
            (more than :data:`MAX_REDIRECTS` hops, or back to the URL or to the first one).
        retire: document keys a permanent redirect retires (their indexed copies are deleted):
            the URL itself and the first URL's key, not the target.
    """

    target: str | None
    failure: str | None = None
    retire: tuple[str, ...] = ()


def redirect_verdict(task: Task, location: str, *, permanent: bool, origin_key: str | None = None,
                     encoding: str | None = None) -> RedirectVerdict:
    """Follow a redirect (HTTP 3xx, an instant ``Refresh`` header or a ``<meta refresh>``) of
    ``task`` to the absolute URL ``location`` (a page's query encoded in its ``encoding``).  ``origin_key`` is the document key the first URL of the chain resolved
    to (``task.origin``'s state), used when ``permanent``.

    Scope and traps are the caller's: the target passes the same gate as any URL.
    """
    origin = task.origin or task.url
    try:
        target = canonicalize(location, encoding=encoding)
    except ValueError:
        return RedirectVerdict(None, "bad-redirect")
    if task.redirects + 1 > MAX_REDIRECTS or target in (task.url, origin):
        return RedirectVerdict(None, "redirect-loop")
    retire: tuple[str, ...] = ()
    if permanent:
        old = origin_key if origin != task.url else None
        retire = tuple(sorted(u for u in {task.url, old} if u is not None and u != target))
    return RedirectVerdict(target, None, retire)


def instant_refresh(url: str, headers: Mapping[str, str]) -> str | None:
    """The target of an HTTP ``Refresh: 0; url=...`` header (the form browsers follow at once),
    absolute; None without one or with a delay."""
    refresh = parse_refresh(headers.get("Refresh") or "")
    if refresh is None or refresh[0] != 0:
        return None
    return urljoin(url, refresh[1])


@dataclass(frozen=True)
class HeadVerdict:
    """What a 2xx answer to a HEAD means: fetch it with GET (``skip`` None), or skip it
    (``unsupported-type`` or ``too-large``) without a GET; ``detail`` for the log, ``size`` the
    declared length in bytes (``too-large``)."""

    skip: str | None = None
    detail: str = ""
    size: int | None = None


def head_verdict(url: str, headers: Mapping[str, str], max_size: int) -> HeadVerdict:
    """LCWA: HEAD first for what does not look like HTML; GET only what is indexed and not
    larger than ``max_size`` bytes (by its ``Content-Length``)."""
    ctype = headers.get("Content-Type")
    length = headers.get("Content-Length")
    if guess_media_type(url, b"", ctype) is None:
        return HeadVerdict("unsupported-type", f"{url}: {ctype or 'no Content-Type'} is not indexed")
    if length and length.isdigit() and int(length) > max_size:
        return HeadVerdict("too-large", f"{url}: {length} bytes > max_size {max_size}", int(length))
    return HeadVerdict()


def robots_directives(values: str | None, token: str = "indexerd") -> frozenset[str]:
    """``X-Robots-Tag: noindex, nofollow`` -> {'noindex', 'nofollow'}.

    A directive may be scoped to a user agent (``otherbot: noindex, nofollow``): the scope holds
    for the directives that follow until the next ``agent:`` prefix (Google's reading of the
    header: https://developers.google.com/search/docs/crawling-indexing/robots-meta-tag); only
    unscoped directives and those for ``token`` apply.  ``none`` means both.
    """
    out: set[str] = set()
    if not values:
        return frozenset()
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
    return frozenset(out)


def conditional_validators(state: UrlState, stored: Callable, *, forced: bool, now: datetime,
                           mirror_has: Callable[[str], bool] | None = None) -> tuple[str | None, str | None]:
    """The ``(ETag, Last-Modified)`` to send for ``state``'s URL (RFC 9110 §13.1), or Nones to
    fetch the page whole.

    ``stored(key)`` gives the stored :class:`~indexerd.core.store.DocumentRecord` of a key or
    None (asked only when validators may be sent).  Validators are sent only for a page indexed
    or a page requisite kept (with a mirror: whose file ``mirror_has(url)``) or skipped for its bytes (:data:`SKIPS_BY_CONTENT`), never in a
    ``forced`` pass nor for a redirect (its ``doc_key`` is the target's); an implausible stored
    Last-Modified (the epoch, the future, relative to ``now``) is not sent, as an exact-match
    server would answer 304 for ever.
    """
    if forced or (state.last_outcome or "").startswith("redirect"):
        return None, None
    rec = stored(state.key)
    if rec is None or not (rec.etag or rec.last_modified_header):
        return None, None
    kept = rec.status == "indexed" or (rec.status == "skipped" and rec.reason == "requisite")
    if not kept and not (rec.status == "skipped" and rec.reason in SKIPS_BY_CONTENT):
        return None, None
    if kept and mirror_has is not None and not mirror_has(state.url):
        return None, None  # the mirror lost its copy: fetch it whole
    lm = rec.last_modified_header
    if lm is not None and not check_plausible(parse_date(lm), now).value:
        lm = None
    return rec.etag, lm


def request_method(url: str, etag: str | None, last_modified: str | None) -> str:
    """``GET`` for a conditional request or a URL that looks like HTML, else ``HEAD`` first."""
    ext = posixpath.splitext(urlsplit(url).path)[1].lower()
    return "GET" if etag or last_modified or ext in HTML_EXTENSIONS else "HEAD"
