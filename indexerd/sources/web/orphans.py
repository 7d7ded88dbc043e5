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
counted ``web.requisite.orphaned`` -- and never asked again.  So is one a referrer stopped
referencing since the last pass began (the store marks what a referrer referenced whenever its
references are replaced or cleared), due or not: its file leaves the mirror at the next pass,
not when adaptive recrawl would have asked it again.  The requisites known before the store
kept references are marked referenced by the page ``''`` (the migration's): kept until a
finished ``ctl reindex --source`` pass has parsed every page
(:meth:`~indexerd.core.store.crawl.CrawlRows.crawl_trust_requisite_references`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from indexerd.sources.web.crawltable import CrawlTable
from indexerd.sources.web.requisites import is_requisite
from indexerd.sources.web.urlstate import UrlState

log = logging.getLogger(__name__)


def drop_orphans(table: CrawlTable, due: Iterable[str], drop: Callable[[str], None], counters) -> set[str]:
    """Drop the page requisites of ``table``'s source that no page needs any more among ``due``
    (a new pass's due requisites) and those a referrer stopped referencing since the last pass
    began (:meth:`~indexerd.core.store.crawl.CrawlRows.crawl_requisites_to_check`: a page
    parsed again, or whose file left the mirror, whatever their schedule); return them.

    ``drop(url)`` removes each one's file and document row; then their crawl rows, and the
    references they made themselves, are deleted in the store at once (so a font only a dropped
    stylesheet used is checked in the next round, until a round drops nothing), and forgotten
    by ``table``; the marks read are cleared last.  Counted ``web.requisite.orphaned``.

    Raises:
        StoreError: the store cannot be read or written.
    """
    store, source = table.store, table.source
    left = list(dict.fromkeys(due))
    marks: set[str] = set()
    dropped: set[str] = set()
    while True:
        new = [url for url in store.crawl_requisites_to_check(source) if url not in marks]
        marks.update(new)
        left += _requisites_among(table, new, set(left) | dropped)
        needed = store.crawl_requisites_referenced(source, left) if left else set()
        unneeded = [url for url in left if url not in needed]
        if not unneeded:
            break
        for url in unneeded:  # the files first: a stop in between leaves rows that say to look again
            drop(url)
            table.forget_unwritten(url)
        store.crawl_drop_requisites(source, unneeded)
        dropped.update(unneeded)
        left = [url for url in left if url in needed]
    if marks:
        store.crawl_requisites_checked(source, marks)
    if dropped:
        counters.inc("web.requisite.orphaned", len(dropped))
        log.info("%s: %d page requisites no page references any more were dropped (their files removed "
                 "from the mirror)", source, len(dropped))
    return dropped


def _requisites_among(table: CrawlTable, urls: list[str], known: set[str]) -> list[str]:
    """Those of ``urls`` (not in ``known``) whose stored crawl row is a page requisite's (an
    off-site URL never fetched has none; an image also linked with ``<a>`` may be a page's)."""
    rows = table.store.crawl_state_rows(table.source, [url for url in urls if url not in known])
    return [url for url, row in rows.items() if is_requisite(UrlState.from_row(row))]
