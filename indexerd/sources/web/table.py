"""The ``[[sources.web]]`` table (with ``politeness`` and ``auth``): its keys and defaults, the
checks its types cannot say and its secrets (the passwords seeds may hold), as
:mod:`indexerd.sources.registry` declares them."""

from __future__ import annotations

import os
import re
from typing import Any


from indexerd.config.schema import _Struct
from indexerd.config.units import Bytes, Seconds
from indexerd.core.errors import ConfigError
from indexerd.core.secrets import mask_userinfo


class Politeness(_Struct, frozen=True):
    """``[sources.web.politeness]``: how hard one host may be asked (AltaVista Scooter's rule).

    The wait before the next request to a host is
    ``max(robots.txt Crawl-delay, min_delay, min(last response time x good_guy_factor, max_wait))``
    (seconds).  Heritrix, which still runs Scooter's rule, uses 5 x the fetch time clamped to
    3-30 s for the open web; the defaults here are for an intranet or a site you run yourself:
    at least 1 s between requests, and our share of the server's time at most a third (factor 2).
    Failures back off exponentially up to ``max_backoff``; ``Retry-After`` is honoured up to
    ``max_retry_after``, robots.txt ``Crawl-delay`` up to ``max_crawl_delay`` (a hostile
    ``Crawl-delay: 86400`` would otherwise park a crawl for a day per page).
    """

    min_delay: Seconds = Seconds(1.0)
    good_guy_factor: float = 2.0
    max_wait: Seconds = Seconds(30.0)
    max_backoff: Seconds = Seconds(600.0)
    max_retry_after: Seconds = Seconds(3600.0)
    max_crawl_delay: Seconds = Seconds(120.0)


class WebAuth(_Struct, frozen=True):
    """``[sources.web.auth]``: HTTP basic credentials, sent only to the source's allowed hosts.

    The password comes from ``password_env`` (an environment variable) or ``password_file``.
    """

    username: str
    password_env: str | None = None
    password_file: str | None = None


class WebSource(_Struct, frozen=True):
    """One ``[[sources.web]]`` table: a site crawled on an interval, optionally mirrored.

    ``max_hops`` is how many links may be followed from a seed (None: no limit); ``path_depth``
    is LCWA's depth spec on the URL path (``N``, ``>N``, ``<N``, ``N-M``, ``+N``, ``-N``);
    ``restrict`` regexes must all match, one of ``include`` must match (empty: all), none of
    ``exclude`` may; ``allowed_domains`` defaults to the seeds' hosts (subdomains included),
    ``allowed_ports`` to the seeds' ports (80 and 443 together).
    ``max_pages`` caps the requests of one pass; ``max_queued`` the URLs waiting in the
    frontier's memory (10 times more wait in the store, new ones beyond are dropped and counted); ``max_numbered_variants`` the
    URLs of one numbered-path pattern a pass queues (:mod:`indexerd.sources.web.traps`); ``gone_after`` is how many consecutive 404/410
    answers delete a page; ``workers`` fetch in parallel from one frontier (one request in
    flight per host whatever their number).  ``timeout`` bounds connect, each read and the
    whole request (seconds).  ``max_recrawl_interval`` bounds adaptive recrawl
    (:mod:`indexerd.sources.web.recrawl`): a page that never changes is still asked this often (at least
    ``interval``; equal to it, every page is asked at every pass).
    With ``mirror_dir``, ``page_requisites`` keeps what a page needs to display (stylesheets,
    scripts, images, fonts, media: :mod:`indexerd.sources.web.requisites`) beside the pages,
    never indexed; from the site's own hosts, and from ``requisite_domains`` (wget's ``-H -D``);
    ``convert_links`` rewrites the kept copies' links for offline browsing (wget's ``-k``:
    :mod:`indexerd.sources.web.convertlinks`).
    """

    name: str
    seeds: list[str]
    interval: Seconds = Seconds(3600.0)
    max_recrawl_interval: Seconds = Seconds(7 * 86400.0)
    max_hops: int | None = None
    path_depth: str | None = None
    restrict: list[str] = []
    include: list[str] = []
    exclude: list[str] = []
    allowed_domains: list[str] | None = None
    allowed_ports: list[int] | None = None
    max_pages: int = 100_000
    order: str = "breadth"
    user_agent: str = "indexerd/0.1 (+https://github.com/indexerd/indexerd)"
    politeness: Politeness = Politeness()
    max_size: Bytes | None = None
    timeout: Seconds = Seconds(30.0)
    mirror_dir: str | None = None
    page_requisites: bool = True
    requisite_domains: list[str] = []
    convert_links: bool = False
    meta_map: str | None = None
    auth: WebAuth | None = None
    sitemaps: bool = True
    gone_after: int = 1
    workers: int = 4
    max_query_variants: int = 100
    max_queued: int = 20_000
    max_numbered_variants: int = 1_000
    date_sources: list[str] | None = None
    refresh_time: Seconds | None = None
    strict_dates: bool | None = None


def check_web_source(src: WebSource, where: str, origin: str) -> None:
    """Seeds, scope regexes, depth spec, numbers and credentials of one web source.

    Raises:
        ConfigError: as ``ORIGIN: WHERE.KEY: what was expected``.
    """
    from indexerd.sources.web.scope import Scope
    from indexerd.sources.web.urls import canonicalize

    if not src.seeds:
        raise ConfigError(f"{origin}: {where}.seeds: expected at least one http(s) URL")
    if src.max_recrawl_interval < src.interval:
        raise ConfigError(f"{origin}: {where}.max_recrawl_interval: expected a duration of at least the "
                          f"source's interval ({float(src.interval):g} s), got {float(src.max_recrawl_interval):g} s")
    for i, seed in enumerate(src.seeds):
        try:
            canonicalize(seed)
        except ValueError as e:
            shown = str(e).replace(repr(seed), repr(mask_userinfo(seed)))  # never print a seed's password
            raise ConfigError(f"{origin}: {where}.seeds[{i}]: {shown}") from None
    try:
        Scope(list(src.seeds), allowed_domains=src.allowed_domains, allowed_ports=src.allowed_ports,
              restrict=src.restrict,
              include=src.include, exclude=src.exclude, path_depth=src.path_depth, max_hops=src.max_hops,
              requisite_domains=src.requisite_domains)
    except ValueError as e:
        raise ConfigError(f"{origin}: {where}.{e}") from None
    if src.order not in ("breadth", "depth"):
        raise ConfigError(f"{origin}: {where}.order: expected 'breadth' or 'depth', got {src.order!r}")
    for key in ("max_pages", "gone_after", "workers", "max_query_variants", "max_queued", "max_numbered_variants"):
        if getattr(src, key) < 1:
            raise ConfigError(f"{origin}: {where}.{key}: expected a whole number >= 1, got {getattr(src, key)}")
    if src.workers > 64:
        raise ConfigError(f"{origin}: {where}.workers: expected at most 64 fetch threads (one request per "
                          f"host is in flight anyway), got {src.workers}")
    if src.timeout > 86400:
        raise ConfigError(f"{origin}: {where}.timeout: expected a duration of at most 1 day")
    if src.max_hops is not None and src.max_hops < 0:
        raise ConfigError(f"{origin}: {where}.max_hops: expected a whole number >= 0, got {src.max_hops}")
    token = (src.user_agent.split("/")[0].split() or [""])[0]
    if not re.fullmatch(r"[A-Za-z_-]+", token):  # RFC 9309 2.2.1: the robots.txt product token
        raise ConfigError(f"{origin}: {where}.user_agent: expected a product token of letters, '_' and '-' "
                          f"first (the name robots.txt rules are matched by, RFC 9309), like "
                          f"'indexerd/0.1 (+https://example.org/bot)', got {src.user_agent!r}")
    if src.timeout <= 0:
        raise ConfigError(f"{origin}: {where}.timeout: expected a duration > 0")
    p = src.politeness
    if p.good_guy_factor < 0 or p.min_delay < 0 or p.max_wait < 0:
        raise ConfigError(f"{origin}: {where}.politeness: delays and factors must be >= 0")
    if src.mirror_dir is not None and not os.path.isabs(os.path.expanduser(src.mirror_dir)):
        raise ConfigError(f"{origin}: {where}.mirror_dir: expected an absolute path, got {src.mirror_dir!r}")
    if src.auth is not None:
        if bool(src.auth.password_env) == bool(src.auth.password_file):
            raise ConfigError(f"{origin}: {where}.auth: set exactly one of password_env or password_file")


def mask_web_source(table: dict[str, Any]) -> None:
    """Hide the passwords of one table's seeds (builtins, in place), for ``check-config``."""
    table["seeds"] = [mask_userinfo(u) for u in table["seeds"]]


def web_paths(src: WebSource) -> list[tuple[str, str, str]]:
    """The directory a web source writes: its ``mirror_dir``, if set (key, path, need as in
    :attr:`indexerd.sources.registry.Kind.paths`)."""
    return [("mirror_dir", os.path.expanduser(src.mirror_dir), "dir")] if src.mirror_dir else []
