"""The daemon's searches: one bounded query runner for the control socket and the HTTP listener.

The daemon's index is open and warm, so a query costs the query, not an import and an open.
What a query may cost is bounded here, once for every caller:

- in time: a query runs on one of the engine's worker threads (:func:`workers_for`) and its caller waits
  at most ``timeout_seconds`` (:class:`QueryTimeout` then; a query still running keeps its
  worker until it ends, so runaway queries can hold at most that many threads and
  later callers wait for a free one within the same bound);
- in results: a page holds at most :data:`MAX_PAGE_SIZE` hits and reaches at most
  :data:`MAX_RESULTS` hits deep.

Filters on sources and media types are added to the query in the query language
(:func:`filtered_query`); the date range, the sort and the count are the index protocol's
(:class:`indexerd.index.SearchIndex`), so every engine answers the same page.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from indexerd.core.errors import ConfigError, IndexerdError
from indexerd.core.replica import REPLICA_LAG_NOTE_SECONDS
from indexerd.index.querylex import quoted_query

if TYPE_CHECKING:
    from indexerd.index.suggest import Suggestion

#: worker threads that run queries when the engine does not say (:func:`workers_for`)
MAX_CONCURRENT = 4
#: the deepest hit a page may reach (offset + page size)
MAX_RESULTS = 1000
#: hits on one page at most
MAX_PAGE_SIZE = 100
#: default bound on one query's wait, in seconds
DEFAULT_TIMEOUT_SECONDS = 5.0
SORTS = ("relevance", "date")


class QueryTimeout(IndexerdError):
    """A query did not finish (or found no free worker) within its time bound; retrying later
    is safe."""

    exit_code = 1


@dataclass(frozen=True)
class SearchRequest:
    """One search: the query text in the product's syntax and what narrows and orders it.

    ``since``/``until`` are aware UTC, ``since <= last_modified < until``; ``sources`` and
    ``media_types`` are alternatives (a hit matches one of each non-empty tuple); ``offset`` and
    ``limit`` count hits (``offset + limit <= MAX_RESULTS`` is checked by :meth:`checked`).
    ``facets``: count the whole query's documents per media type and source too
    (:attr:`SearchResult.facets`); the search page and ``/api/search`` ask, ``ctl search`` does
    not (it prints none), and a query is not evaluated for what nobody reads.
    """

    query: str
    sources: tuple[str, ...] = ()
    media_types: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    sort: str = "relevance"
    offset: int = 0
    limit: int = 10
    snippet_chars: int = 240
    facets: bool = False

    def checked(self, max_results: int = MAX_RESULTS) -> "SearchRequest":
        """This request, or ConfigError (exit 2) naming the bound it breaks."""
        if self.sort not in SORTS:
            raise ConfigError(f"sort must be one of {', '.join(SORTS)}, got {self.sort!r}")
        if self.limit < 1:
            raise ConfigError(f"limit must be 1 or more, got {self.limit}")
        if self.offset < 0:
            raise ConfigError(f"offset must be 0 or more, got {self.offset}")
        if self.offset + self.limit > max_results:
            raise ConfigError(f"results are bounded: offset + limit must be at most {max_results}, "
                              f"got {self.offset} + {self.limit}")
        return self


@dataclass
class SearchResult:
    """The hits of one page (``indexerd.index.Hit``, ranks counted from 1 over the whole result),
    the number of hits of the whole query and the time the
    query took in seconds (from the moment a worker ran it).  ``replica_lag_seconds``: how far
    behind its primary the read replica that answered was, when more than
    :data:`REPLICA_LAG_NOTE_SECONDS` (documents indexed in that time may be missing); None
    otherwise (no replica, a replica caught up, or the primary answered).  ``facets``: the
    whole query's documents counted per media type and per source
    (:meth:`indexerd.index.SearchIndex.facets`; identical documents folded into a hit taken off,
    as in ``total``), None when the
    request did not ask (:attr:`SearchRequest.facets`; ``ctl search``).  ``suggestion``: when the first page is empty, a query near it that
    finds something (:func:`indexerd.index.suggest.suggest`), else None."""

    hits: list
    total: int
    elapsed_seconds: float
    offset: int = 0
    request: SearchRequest | None = field(default=None, repr=False)
    replica_lag_seconds: float | None = None
    facets: dict[str, list[tuple[str, int]]] | None = None
    suggestion: Suggestion | None = None


def replica_lag_noted(lag_seconds: float | None) -> float | None:
    """``lag_seconds`` (rounded to ms) when a search must say its replica lags (more than
    :data:`REPLICA_LAG_NOTE_SECONDS`), else None."""
    if lag_seconds is None or lag_seconds <= REPLICA_LAG_NOTE_SECONDS:
        return None
    return round(lag_seconds, 3)


def replica_lag_text(lag_seconds: float) -> str:
    """The note a lagging replica's answer carries (``ctl search``, the search page)."""
    return (f"these results come from a read replica {lag_seconds:.1f} s behind the primary: "
            "documents indexed or changed since may be missing or out of date")


_FILTER_VALUE = re.compile(r"[A-Za-z0-9_.+/-]+")


def filtered_query(req: SearchRequest) -> str:
    """The query with the source and media-type filters added in the query language
    (``(QUERY) AND (source:a OR source:b) AND (media_type:text/html)``).

    Raises:
        QueryError: the query itself is malformed (its own message, checked alone first).
        ConfigError: a filter value that is no source name or media type.
    """
    from indexerd.index.query import parse

    parse(req.query)   # the user's query alone: its errors name its own characters
    parts = [f"({req.query})"]
    for name, values in (("source", req.sources), ("media_type", req.media_types)):
        for v in values:
            if not _FILTER_VALUE.fullmatch(v):
                raise ConfigError(f"{name}: {v!r} is not a {name.replace('_', ' ')}")
        if values:
            parts.append("(" + " OR ".join(f"{name}:{v}" for v in values) + ")")
    return " AND ".join(parts) if len(parts) > 1 else req.query


#: how many times the hits of a page a collapsed search reads at most (it reads twice as many,
#: then twice that while identical documents leave the page short)
COLLAPSE_DEPTH_FACTOR = 8


def search_any_engine(ix, req: SearchRequest, *, exact: bool = False,
                      hashes: Callable[[list[str]], dict[str, str]] | None = None) -> SearchResult:
    """Run ``req`` on ``ix`` (an :class:`indexerd.index.SearchIndex`): the hits of its page
    (ranked ``offset + 1`` on) and the number of hits of the whole query.  ``exact``: the
    request comes from ``ctl search`` and goes to ``ix.search`` as ``ctl search`` sends it when
    it reads the index itself (same hits either way); no count then.  Facets are counted only
    when ``req.facets`` asks (and the query has hits); an engine with ``count_and_facets``
    (Whoosh: the query's matches evaluated once for both) counts the two together.

    An index with a read replica (``replica_lag_seconds()``, the PostgreSQL engine's) is asked
    after the search how far behind it is (:func:`replica_lag_noted`).

    ``hashes`` (keys -> ``{key: content hash}``, the state store's): identical documents collapse
    into their best-ranked hit (:mod:`indexerd.daemon.collapse`), which lists the others in
    ``also_at``; the hits read are twice the page's depth, doubled while collapsing leaves the
    page short (at most :data:`COLLAPSE_DEPTH_FACTOR` times); snippets are made only for the hits
    the page shows after collapsing (the engine's ``snippets_for``).  The total and the facets
    (:func:`indexerd.daemon.collapse.folded_facets`) then count each set of
    identical documents once among the hits read; duplicates deeper than that are still counted
    (exact whenever every hit was read).  None: no collapsing.

    Raises:
        QueryError: the query is malformed (exit 2).
        IndexUnavailable: the index cannot be read.
        StoreError: ``hashes`` could not read the store.
    """
    from indexerd.daemon.collapse import collapse, folded_facets, shown_keys

    started = time.perf_counter()
    query = req.query if exact else filtered_query(req)
    want = req.offset + req.limit
    folded, found = 0, []
    if hashes is None:
        hits = ix.search(query, limit=want, since=req.since, until=req.until,
                         snippet_chars=req.snippet_chars, sort=req.sort)
    else:
        read_hashes = hashes
        read: dict[str, str] = {}

        def shown(keys: list[str]) -> set[str]:
            """The keys the page shows once collapsed: the only hits that get a snippet."""
            read.clear()
            read.update(read_hashes(keys))
            return shown_keys(keys, read, req.offset, want)

        depth = want * 2
        while True:
            found = ix.search(query, limit=depth, since=req.since, until=req.until,
                              snippet_chars=req.snippet_chars, sort=req.sort, snippets_for=shown,
                              others_keys_only=not req.facets)  # folded facets need the others
            hits, folded = collapse(found, read)
            if len(hits) >= want or len(found) < depth or depth >= want * COLLAPSE_DEPTH_FACTOR:
                break
            depth *= 2
    firsts = {h.key for h in hits}
    hits = hits[req.offset:want]
    facets = None
    both = getattr(ix, "count_and_facets", None)
    if req.facets and not exact and both is not None:
        counted, facets = both(query, since=req.since, until=req.until)
        total = counted - folded
    else:
        total = len(hits) if exact else ix.count(query, since=req.since, until=req.until) - folded
        if req.facets:
            facets = ix.facets(query, since=req.since, until=req.until) if total > 0 else {}
    if facets is not None:   # identical documents count once, as in the total
        facets = folded_facets(facets, [h for h in found if h.key not in firsts]) if total > 0 else {}
    suggestion = None
    if not hits and req.offset == 0:
        suggestion = suggestion_for(ix, req, narrowed=not exact)
    measure = getattr(ix, "replica_lag_seconds", None)
    lag = replica_lag_noted(measure()) if measure is not None else None
    return SearchResult(hits=hits, total=total, offset=req.offset, request=req,
                        elapsed_seconds=time.perf_counter() - started, replica_lag_seconds=lag,
                        facets=facets, suggestion=suggestion)


def suggestion_for(ix, req: SearchRequest, *, narrowed: bool) -> Suggestion | None:
    """'Did you mean' for ``req``, whose query found nothing in ``ix``
    (:func:`indexerd.index.suggest.suggest`, with the analyzer the index was opened with):
    ``narrowed``, the suggestion must find something under the request's source and
    media-type filters too.

    Raises:
        QueryError, IndexUnavailable: as a search.
    """
    from dataclasses import replace

    from indexerd.index.analysis import analyzer as shared_analyzer
    from indexerd.index.suggest import suggest

    analyzer = getattr(ix, "analyzer", None) or shared_analyzer(fold_diacritics=getattr(ix, "fold_diacritics", True))
    return suggest(ix, req.query, analyzer, since=req.since, until=req.until,
                   narrowed=(lambda q: filtered_query(replace(req, query=q))) if narrowed else None)


def workers_for(engine: str) -> int:
    """How many queries to run at once on the engine called ``engine``: its ``query_threads``
    (:class:`indexerd.index.base.Engine`), else :data:`MAX_CONCURRENT` (an engine that cannot be
    loaded fails the daemon's start later, saying why)."""
    from indexerd.index.base import load_engine

    try:
        return load_engine(engine).query_threads
    except ConfigError:
        return MAX_CONCURRENT


class QueryRunner:
    """Runs searches on the daemon's open index, bounded in time and concurrency.

    Args:
        index: returns the open index (``None`` when there is none yet: IndexUnavailable).
        timeout_seconds: how long a caller waits for its query (a free worker included).
        workers: worker threads (at most this many queries run at once).
        max_results: the deepest hit a page may reach.
        observe: called with ``(via, seconds)`` after each query that answered (metrics).
        hashes: keys -> ``{key: content hash}`` from the state store, to collapse identical
            documents (:func:`search_any_engine`); None: no collapsing.

    Thread safety: :meth:`run` may be called from any number of threads.
    """

    def __init__(self, index: Callable[[], object], *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                 workers: int = MAX_CONCURRENT, max_results: int = MAX_RESULTS,
                 observe: Callable[[str, float], None] | None = None,
                 hashes: Callable[[list[str]], dict[str, str]] | None = None) -> None:
        self._index = index
        self._hashes = hashes
        self._observe = observe
        self.timeout_seconds = timeout_seconds
        self.max_results = max_results
        self._slots = threading.BoundedSemaphore(workers)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="query")
        self._closed = False

    def run(self, req: SearchRequest, *, via: str = "http", unbounded: bool = False) -> SearchResult:
        """The page ``req`` asks for.

        ``via`` names the caller for the metrics (``http``, ``ctl``); ``unbounded`` lifts the
        bound on results (``ctl search --limit N`` answers as many as it asks, as it does when it
        reads the index itself); the time bound stays.

        Raises:
            ConfigError: a bound or a field of ``req`` is out of range (exit 2).
            QueryError: the query is malformed (exit 2).
            QueryTimeout: no answer within ``timeout_seconds`` (exit 1).
            IndexUnavailable: there is no readable index.
        """
        req.checked(self.max_results if not unbounded else req.offset + req.limit)
        if not unbounded and req.limit > MAX_PAGE_SIZE:
            raise ConfigError(f"results are bounded: limit must be at most {MAX_PAGE_SIZE}, got {req.limit}")
        from indexerd.index.query import parse

        parse(req.query)  # a malformed query is refused at once, not after waiting for a busy worker
        deadline = time.monotonic() + self.timeout_seconds
        if self._closed or not self._slots.acquire(timeout=self.timeout_seconds):
            raise QueryTimeout(f"no query worker was free within {self.timeout_seconds:g} s "
                               "(the daemon is busy or stopping); try again")
        try:
            future = self._pool.submit(self._search, req, unbounded)
        except RuntimeError:               # the pool was shut down under us
            self._slots.release()
            raise QueryTimeout("the daemon is stopping") from None
        future.add_done_callback(lambda _f: self._slots.release())
        try:
            result = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            raise QueryTimeout(f"the query {quoted_query(req.query)} took longer than {self.timeout_seconds:g} s; "
                               "narrow it (more words, a field, a date range)") from None
        if self._observe is not None:
            self._observe(via, result.elapsed_seconds)
        return result

    def _search(self, req: SearchRequest, exact: bool) -> SearchResult:
        from indexerd.core.errors import IndexUnavailable

        ix = self._index()
        if ix is None:
            raise IndexUnavailable("the daemon has no index open yet")
        return search_any_engine(ix, req, exact=exact, hashes=self._hashes)

    def close(self) -> None:
        """Refuse new queries; running ones finish on their own.  Safe to call twice."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)


def facets_json(facets: dict[str, list[tuple[str, int]]] | None) -> dict | None:
    """Facets as ``/api/search`` returns them: ``{"media_type": [{"value": "text/html",
    "count": 812}, ...], "source": [...]}``, most first; None stays None."""
    if facets is None:
        return None
    return {name: [{"value": v, "count": n} for v, n in values] for name, values in facets.items()}


def suggestion_json(suggestion: Suggestion | None) -> dict | None:
    """A suggestion as ``/api/search`` and ``ctl search --json`` give it: ``{"query": ...,
    "replaced": [[typed, suggested], ...], "hits": N}``; None stays None."""
    if suggestion is None:
        return None
    return {"query": suggestion.query, "replaced": [list(p) for p in suggestion.replaced], "hits": suggestion.hits}


def hits_json(hits) -> list[dict]:
    """Hits as ``indexerd ctl search --json`` prints them (and ``/api/search`` returns them):
    rank, key, url, path (only when some hit has one; then dropped from the hits without),
    also_at (the keys of identical documents folded into the hit, best first; ``[]`` for none),
    title, last_modified (ISO 8601 UTC), date_source, score (4 decimals), snippet, marks (the
    ``[start, end)`` character offsets, in code points, of what matched in the snippet),
    snippet_note (why the snippet shows no match, or null), source, media_type."""
    from indexerd.core.dates import format_utc

    out = [{"rank": h.rank, "key": h.key, "url": h.url, "path": h.path, "title": h.title,
            "last_modified": format_utc(h.last_modified), "date_source": h.date_source,
            "score": round(h.score, 4), "snippet": h.snippet, "marks": [list(m) for m in h.marks],
            "snippet_note": h.snippet_note, "also_at": list(h.also_at), "source": h.source,
            "media_type": h.media_type} for h in hits]
    keep_paths = any(h.path for h in hits)
    for o in out:
        if not keep_paths or o["path"] is None:
            o.pop("path")
    return out
