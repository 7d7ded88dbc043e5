"""Page requisites no page needs any more (issue 33's orphans): found when they come due, then
dropped instead of asked.

What keeps a requisite is what references it, recorded in the crawl store's
``crawl_requisites`` rows (:meth:`~indexerd.sources.web.crawltable.CrawlTable.set_requisites`):
an HTML page kept in the mirror records what it needs to display at each parse (a ``200``); a
``304`` leaves its record as it is (the page did not change, so neither did its requisites); a
page whose file leaves the mirror (gone, skipped, ``noindex``, out of scope) needs nothing any
more.  A stylesheet records its ``@import``, fonts and images, and a requisite that redirected
its target: they are needed while the stylesheet (or the redirect) is.  A requisite is needed
while some page kept in the mirror references it, directly or through requisites that page
needs (:meth:`~indexerd.core.store.crawl.CrawlRows.crawl_requisites_referenced`): one shared by
two pages stays while either references it.

A new pass checks its due requisites before it queues them (the cost follows what is due, as
the rest of a pass's start does): one no page needs is dropped -- its crawl row deleted (not
kept as a tombstone: :meth:`~indexerd.core.store.crawl.CrawlRows.crawl_drop_requisites` says
why), its file removed from ``mirror_dir``, its document row (a skipped ``requisite``) deleted,
counted ``web.requisite.orphaned`` -- and never asked again.  A requisite not due yet is checked
when it is (at most ``max_recrawl_interval`` later).  The requisites known before the store
kept references are marked referenced by the page ``''`` (the migration's): kept until a
finished ``ctl reindex --source`` pass has parsed every page
(:meth:`~indexerd.core.store.crawl.CrawlRows.crawl_trust_requisite_references`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from indexerd.sources.web.crawltable import CrawlTable

log = logging.getLogger(__name__)


def drop_orphans(table: CrawlTable, candidates: Iterable[str], drop: Callable[[str], None], counters) -> set[str]:
    """Drop those of the page requisites ``candidates`` (URLs of ``table``'s source: the due
    ones of a new pass) that no page needs any more; return them.

    ``drop(url)`` removes each one's file and document row; then their crawl rows, and the
    references they made themselves, are deleted in the store at once (so a font only a dropped
    stylesheet used is found unneeded in the next round, until a round drops nothing), and
    forgotten by ``table``.  Counted ``web.requisite.orphaned``.

    Raises:
        StoreError: the store cannot be read or written.
    """
    store, source = table.store, table.source
    left = list(dict.fromkeys(candidates))
    dropped: set[str] = set()
    while left:
        needed = store.crawl_requisites_referenced(source, left)
        unneeded = [url for url in left if url not in needed]
        if not unneeded:
            break
        for url in unneeded:  # the files first: a stop in between leaves rows that say to look again
            drop(url)
            table.forget_unwritten(url)
        store.crawl_drop_requisites(source, unneeded)
        dropped.update(unneeded)
        left = [url for url in left if url in needed]
    if dropped:
        counters.inc("web.requisite.orphaned", len(dropped))
        log.info("%s: %d page requisites no page references any more were dropped (their files removed "
                 "from the mirror)", source, len(dropped))
    return dropped
