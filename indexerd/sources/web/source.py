"""The web source: a polite, incremental crawl of one site per ``[[sources.web]]`` table.

:class:`WebCrawlSource` holds what outlives a pass (the config, the scope, the robots.txt cache, the
HTTP client, the mirror); a pass is run by :class:`~indexerd.sources.web.crawlpass.CrawlPass`
(the module docstring there draws the data flow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import threading
from datetime import datetime, timezone
from functools import cached_property

from indexerd.config import SourcePolicy
from indexerd.sources.web.table import WebSource as WebSourceConfig
from indexerd.core.metamap import MetaMap
from indexerd.core.decide import DecideSettings
from indexerd.core.errors import ConfigError
from indexerd.core.counts import PassCounts
from indexerd.pipeline.fetched import Policy
from indexerd.pipeline.stages import Pipeline
from indexerd.sources.web.crawlpass import CrawlPass
from indexerd.sources.web.fetch import Fetcher
from indexerd.sources.web.mirror import Mirror
from indexerd.sources.web.politeness import HOST_SLOTS, HostSlots, PolitenessSettings
from indexerd.sources.web.robots import RobotsCache
from indexerd.sources.web.scope import Scope
from indexerd.sources.web.urls import canonicalize, host_key, path_depth

if TYPE_CHECKING:
    from indexerd.core.store.protocols import StateStore, StoreBasics

UTC = timezone.utc


def _utc_now() -> datetime:
    return datetime.now(UTC)


class WebCrawlSource:
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
    key_prefixes = ("http://", "https://")
    unknown_reason = "no page is fetched for it"  # never said: reindex fetches every URL it owns

    def __init__(self, cfg: WebSourceConfig, policy: SourcePolicy, meta_map: MetaMap,
                 slots: HostSlots = HOST_SLOTS, clock=_utc_now) -> None:
        self.cfg = cfg
        self.clock = clock
        self.name = cfg.name
        self.max_size = policy.max_size_bytes
        self.slots = slots
        self.scope = Scope(list(cfg.seeds), allowed_domains=cfg.allowed_domains,
                           allowed_ports=cfg.allowed_ports, restrict=cfg.restrict,
                           include=cfg.include, exclude=cfg.exclude, path_depth=cfg.path_depth,
                           max_hops=cfg.max_hops, requisite_domains=cfg.requisite_domains,
                           requisites=cfg.page_requisites and cfg.mirror_dir is not None)
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
        self.mirror = (Mirror(os.path.expanduser(cfg.mirror_dir), adjust_extension=cfg.convert_links)
                       if cfg.mirror_dir else None)
        self._fetcher: Fetcher | None = None

    @cached_property
    def seed_hosts(self) -> frozenset[str]:
        """The host keys (``scheme://host:port``) of the seeds: sitemaps are read only there."""
        return frozenset(host_key(canonicalize(s)) for s in self.cfg.seeds)

    # -- plumbing -------------------------------------------------------------------------
    def _password(self) -> str:
        a = self.cfg.auth
        assert a is not None, "asked only for a source with auth"
        if a.password_env:
            value = os.environ.get(a.password_env)
            if value is None:
                raise ConfigError(f"sources.web {self.name}: auth.password_env: environment variable "
                                  f"{a.password_env} is not set")
            return value
        assert a.password_file is not None, "auth has password_env or password_file (config check)"
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

    def check(self, where: str, *, files: bool) -> None:
        """Nothing before a pass: credentials are read when the first request needs them."""

    def status_facts(self) -> dict:
        return {"root": None}

    def on_forgotten(self, store: StateStore, key: str) -> None:
        """``ctl forget URL``: the page is due at the next crawl whatever its adaptive-recrawl
        schedule said (a crawl running now keeps its own schedule for it)."""
        store.crawl_due_now(self.name, key, "forgotten (ctl forget): due at the next crawl")

    # -- one pass -------------------------------------------------------------------------
    def run_pass(self, pipeline: Pipeline, counts: PassCounts, *, progress=None, forced: bool = False,
                 start: str | None = None, cancel: threading.Event | None = None,
                 recheck: bool = False) -> None:
        """Crawl the site once (or resume the pass a stop interrupted).

        ``forced`` (``ctl reindex``) sends no validators and re-indexes every page fetched;
        ``recheck`` (``ctl crawl NAME --all``) asks every known page, with its validators,
        whatever adaptive recrawl scheduled (a 304 costs a request, nothing more).
        Per-reason counters go to ``pipeline.counters`` (``web.*``, ``skip.*``, ``error.*``).

        Raises:
            ConfigError: credentials cannot be read.
            StoreError: the state store cannot be written.
        """
        CrawlPass(self, pipeline, counts, progress, forced, cancel, recheck=recheck).run()

    def pass_running(self, store: StoreBasics) -> bool:
        """Whether a pass of this source is under way in ``store`` (begun, not finished: in a
        cluster, a node joins it).

        Raises:
            StoreError: the store cannot be read.
        """
        from indexerd.sources.web.crawltable import pass_meta_key
        from indexerd.sources.web.urlstate import PassState

        return PassState.from_json(store.get_meta(pass_meta_key(self.name))).running

    def pass_begun_at(self, store: StoreBasics) -> datetime | None:
        """When the source's latest pass began (aware UTC; running or not), or None before any.

        Raises:
            StoreError: the store cannot be read.
        """
        from indexerd.sources.web.crawltable import pass_meta_key
        from indexerd.sources.web.urlstate import PassState

        return PassState.from_json(store.get_meta(pass_meta_key(self.name))).started

    def owns(self, url: str) -> bool:
        """True when the canonical ``url`` is in this source's scope as a page one hop from a
        seed of its host (what ``ctl reindex URL`` may fetch for a URL it has no row for); a
        key that is no http(s) URL is not its own."""
        if not url.startswith(self.key_prefixes):
            return False
        seeds = [canonicalize(s) for s in self.cfg.seeds]
        depth = next((path_depth(s) for s in seeds if host_key(s) == host_key(url)), 1)
        hops = 1 if self.cfg.max_hops is None else min(1, self.cfg.max_hops)
        return self.scope.check(url, hops=hops, seed_depth=depth) is None

    def reindex(self, urls: list[str], pipeline: Pipeline, counts: PassCounts, *,
                cancel: threading.Event | None = None) -> list[str]:
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
        CrawlPass(self, pipeline, counts, None, True, cancel, only=list(urls)).run()
        return []  # every URL it owns is fetched: an answer is a verdict, not "unknown"
