"""A page's outlinks on their way to the frontier: one canonical spelling each, then the scope
test and the trap guards, each drop counted once per pass.

The rules themselves live where they belong (:class:`~indexerd.sources.web.scope.Scope`,
:func:`~indexerd.sources.web.traps.trap_reason`, :class:`~indexerd.sources.web.traps.QueryVariants`,
:class:`~indexerd.sources.web.traps.PatternGuard`); this module applies them in order and keeps
the pass's memory of what it dropped.  Used by the thread that runs the pass only.
"""

from __future__ import annotations

import functools

from indexerd.sources.web.scope import Scope
from indexerd.sources.web.traps import PatternGuard, QueryVariants, trap_reason
from indexerd.sources.web.urls import canonicalize

#: Outlinks kept per page (the rest are dropped and counted: a page of 100,000 links is a trap).
MAX_LINKS_PER_PAGE = 10_000
#: Dropped URLs remembered per pass so each is counted once (beyond: counted again when met again).
MAX_DROPPED_REMEMBERED = 100_000
#: Drops that depend on the path taken: not remembered, as another page may reach the URL in
#: fewer hops.
PATH_DEPENDENT = frozenset({"max-hops", "path-depth"})


@functools.lru_cache(maxsize=65536)
def _canonical_link(url: str, encoding: str | None = None) -> str:
    """:func:`canonicalize` (query in the page's ``encoding``), memoised: a site's navigation
    links repeat on every page."""
    return canonicalize(url, encoding)


class LinkFilter:
    """The pass's link filter.

    Args:
        scope: the source's scope.
        counters: the pass's named counters (``inc(name, n=1)``).
        max_query_variants: :class:`QueryVariants` limit per path.
        max_numbered_variants: :class:`PatternGuard` limit per numbered-path pattern.
    """

    def __init__(self, scope: Scope, counters, *, max_query_variants: int, max_numbered_variants: int) -> None:
        self.scope = scope
        self.counters = counters
        self.query_variants = QueryVariants(max_query_variants)
        self.patterns = PatternGuard(max_numbered_variants, max_query_variants)
        self.dropped: set[str] = set()

    def canonical(self, raw, encoding: str | None) -> list[str]:
        """The distinct canonical forms of the links ``raw`` (as written in a page whose
        encoding is ``encoding``), in page order, fragments dropped, at most
        :data:`MAX_LINKS_PER_PAGE` (``web.trap.too-many-links``).  An http(s) link that cannot be
        canonicalised is counted ``web.drop.invalid``; other schemes (``mailto:``,
        ``javascript:``) are not links to crawl and are ignored silently."""
        out: list[str] = []
        seen: set[str] = set()
        for link in raw:
            try:
                c = _canonical_link(link.partition("#")[0], encoding)
            except ValueError:
                if link[:8].lower().startswith(("http://", "https://")):
                    self.counters.inc("web.drop.invalid")
                continue
            if c not in seen:
                seen.add(c)
                out.append(c)
        if len(out) > MAX_LINKS_PER_PAGE:
            self.counters.inc("web.trap.too-many-links")
            out = out[:MAX_LINKS_PER_PAGE]
        return out

    def dropped_before(self, url: str) -> bool:
        """``url`` was dropped earlier in this pass (for a reason not tied to the path taken)."""
        return url in self.dropped

    def forget_later(self, url: str, reason: str) -> None:
        """Remember that ``url`` is dropped for ``reason`` (nothing for :data:`PATH_DEPENDENT`)."""
        if reason not in PATH_DEPENDENT:
            self.dropped.add(url)

    def admit(self, link: str, *, hops: int, seed_depth: int) -> bool:
        """Whether the canonical ``link``, ``hops`` links from a seed of path depth ``seed_depth``,
        may be queued: the scope (``web.drop.<reason>``), then the traps (``web.trap.<reason>``:
        a trap-like path, too many query variants, too many numbered variants)."""
        reason = self.scope.check(link, hops=hops, seed_depth=seed_depth)
        kind = "drop"
        if reason is None:
            kind = "trap"
            reason = trap_reason(link)
            if reason is None and not self.query_variants.admit(link):
                reason = "query-variants"
            if reason is None:
                reason = self.patterns.admit(link)
        if reason is None:
            return True
        if reason not in PATH_DEPENDENT and len(self.dropped) < MAX_DROPPED_REMEMBERED:
            self.dropped.add(link)
        self.counters.inc(f"web.{kind}.{reason}")
        return False
