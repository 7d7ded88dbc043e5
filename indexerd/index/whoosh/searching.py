"""Queries against a Whoosh index: the product's query language compiled for Whoosh, date
filters, hits with snippets.  Stored text is zlib-compressed (``text_z``); Whoosh's ``DATETIME``
keeps naive UTC, read back as aware UTC."""

from __future__ import annotations

import codecs
import logging
import zlib
from bisect import bisect_right
from collections.abc import Callable, Container, Iterator
from datetime import datetime

from indexerd.core.dates import to_utc
from indexerd.core.errors import QueryError

from indexerd.index.analysis import analyzer as shared_analyzer
from indexerd.index.base import Hit, Sort
from indexerd.index.query import parse
from indexerd.index.querytokens import analyse_query
from indexerd.index.snippets import NO_SNIPPET, SnippetQuery, make_snippet
from indexerd.index.whoosh import patches
from indexerd.index.whoosh.compile import compile_query
from indexerd.index.whoosh.session import naive_utc

log = logging.getLogger(__name__)


#: bytes of stored text inflated first for a snippet (each next chunk twice as many)
FIRST_CHUNK_BYTES = 8192


def stored_text_chunks(blob: bytes) -> Iterator[str]:
    """The stored text ``text_z`` (zlib, UTF-8) decoded chunk by chunk, as decoding it whole
    would (undecodable bytes as U+FFFD); the chunks grow from :data:`FIRST_CHUNK_BYTES`.

    Raises:
        zlib.error: the blob is not a zlib stream.
    """
    inflate = zlib.decompressobj()
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode
    data, size = blob, FIRST_CHUNK_BYTES
    while not inflate.eof:
        out = inflate.decompress(data, size)
        data = inflate.unconsumed_tail
        if out:
            yield decode(out)
        elif not data:
            break
        size *= 2
    yield decode(b"", True)


def _utc(dt: datetime | None) -> datetime | None:
    """Whoosh's naive UTC as aware UTC (:func:`indexerd.core.dates.to_utc`); None stays None."""
    return None if dt is None else to_utc(dt)


def date_filter(since: datetime | None, until: datetime | None):
    from whoosh import query as wq

    if since is None and until is None:
        return None
    return wq.DateRange("last_modified", naive_utc(since), naive_utc(until), startexcl=False, endexcl=True)

#: The most words of the index a query's prefixes may expand to on Whoosh, which scores each of
#: them in Python on its one query worker: ``a* OR b* ... OR 9*`` kept that worker 44 s on a
#: 7,500-file tree, long after its caller's timeout.  Counted before the search starts.
MAX_PREFIX_TERMS = 2000


def _check_prefixes(q, searcher) -> None:
    """Refuse ``q`` when its prefixes expand to more than :data:`MAX_PREFIX_TERMS` words.

    Raises:
        QueryError: they do (exit 2; the message says to make the prefixes longer).
    """
    from whoosh import query as wq

    reader, left = searcher.reader(), MAX_PREFIX_TERMS
    for leaf in q.leaves():
        if isinstance(leaf, wq.Prefix):
            for _ in reader.expand_prefix(leaf.fieldname, leaf.text):
                left -= 1
                if left < 0:
                    raise QueryError(f"the query's prefixes match more than {MAX_PREFIX_TERMS} words of the "
                                     f"index: make them longer (or use tantivy, which has no such bound)")


def analysed(query: str, fold_diacritics: bool = True):
    """The analysed tree of ``query`` (the product's query language, the shared analyzer with
    accents folded or kept).

    Raises:
        QueryError: the query is malformed (the parser's message, the same on every engine).
    """
    return analyse_query(parse(query), shared_analyzer(fold_diacritics=fold_diacritics))

def count(searchers, query: str | None, since: datetime | None, until: datetime | None,
          fold_diacritics: bool = True) -> int:
    """How many documents of the Whoosh index match ``query`` (None: all) with
    ``since <= last_modified < until`` (UTC), counted over whole posting lists
    (:func:`~indexerd.index.whoosh.bulkscore.count_documents`) where that can evaluate the query,
    else by Whoosh's collector; ``searchers`` lends the searcher
    (:class:`indexerd.index.whoosh.searchers.SearcherPool`).

    Raises:
        QueryError: the query is malformed, or its prefixes match too many words
            (:data:`MAX_PREFIX_TERMS`).
    """
    from whoosh import query as wq

    q = wq.Every() if query is None else compile_query(analysed(query, fold_diacritics))
    if q is None:  # nothing to search (only stop words)
        return 0
    filt = date_filter(since, until)
    with searchers.searcher() as searcher:
        _check_prefixes(q, searcher)
        if query is not None and patches.active():
            from indexerd.index.whoosh.bulkscore import Unsupported, count_documents

            try:
                return count_documents(searcher, q, allow=searcher._filter_to_comb(filt))
            except Unsupported as e:
                log.debug("query %s counted by Whoosh's collector: %s", q, e)
        # (``len(results)`` would count the query's documents without the filter)
        return searcher.search(q, limit=None, scored=False, filter=filt).scored_length()

def _best(searcher, q, limit: int, filt, sort: Sort, kept: list) -> list[tuple[float | None, int]]:
    """The first ``limit`` ``(score, docnum)`` of ``q`` on ``searcher`` (Whoosh's query and
    searcher; ``filt`` a Whoosh filter query or None): by relevance, every match scored at once
    (:func:`~indexerd.index.whoosh.bulkscore.top_documents`, the same documents, order and scores
    as Whoosh's collector scoring every match; only on the Whoosh release
    :mod:`~indexerd.index.whoosh.patches` was written for), or by Whoosh's collector where that
    cannot evaluate the query; by
    date, newest first (Whoosh's sorting collector, score None).  ``kept`` gets the bulk
    evaluation's segments (:func:`~indexerd.index.whoosh.bulkscore.top_documents`), when it ran."""
    if sort == "relevance" and patches.active():
        from indexerd.index.whoosh.bulkscore import Unsupported, top_documents

        try:
            return list(top_documents(searcher, q, limit, allow=searcher._filter_to_comb(filt), kept=kept))
        except Unsupported as e:
            log.debug("query %s scored by Whoosh's collector: %s", q, e)
        results = searcher.search(q, limit=limit, filter=filt)
    else:
        results = searcher.search(q, limit=limit, filter=filt, sortedby="last_modified", reverse=True)
    return [(h.score, h.docnum) for h in results]


def search(searchers, query: str, limit: int, since: datetime | None, until: datetime | None, snippet_chars: int,
           sort: Sort, fold_diacritics: bool = True,
           snippets_for: Callable[[list[str]], Container[str]] | None = None,
           others_keys_only: bool = False) -> list[Hit]:
    """The first ``limit`` hits of ``query`` in the Whoosh index, best first (``sort``
    ``"relevance"``) or newest first (``"date"``), each with a snippet of about ``snippet_chars``
    characters (only for the keys ``snippets_for`` chooses, as
    :meth:`indexerd.index.SearchIndex.search` says; with ``others_keys_only`` the others are
    read from the ``key`` and ``source`` columns, not their stored fields: ~50 us a hit, most of
    it inflating the stored text); ``last_modified`` aware UTC; ``searchers`` lends the searcher
    (:class:`indexerd.index.whoosh.searchers.SearcherPool`).

    Raises:
        QueryError: the query is malformed, or its prefixes match too many words
            (:data:`MAX_PREFIX_TERMS`).
    """
    tree = analysed(query, fold_diacritics)
    q = compile_query(tree)
    if q is None or limit < 1:  # nothing to search (only stop words), or nothing asked
        return []
    sq = SnippetQuery(tree, shared_analyzer(fold_diacritics=fold_diacritics))
    with searchers.searcher() as searcher:
        _check_prefixes(q, searcher)
        kept: list = []
        found = _best(searcher, q, limit, date_filter(since, until), sort, kept)
        fields, chosen = _fields_of(searcher, [docnum for _score, docnum in found], snippets_for,
                                    others_keys_only)
        absent: dict[int, frozenset[str]] = {}
        if kept:  # scored in bulk (numpy is imported)
            from indexerd.index.whoosh.wordsheld import words_absent

            absent = words_absent(kept, [d for (_s, d), stored in zip(found, fields)
                                         if chosen is None or stored["key"] in chosen],
                                  sq.terms.union(*sq.phrases))
        hits = []
        for i, ((score, docnum), stored) in enumerate(zip(found, fields), 1):
            if chosen is None or stored["key"] in chosen:
                text = stored_text_chunks(stored["text_z"]) if stored.get("text_z") else ()
                snip = make_snippet(text, sq, snippet_chars, title=stored.get("title") or "",
                                    absent=absent.get(docnum, ()))
            else:
                snip = NO_SNIPPET
            hits.append(Hit(rank=i, key=stored["key"],
                            url=stored["key"], path=stored.get("path"),
                            source=stored.get("source", ""), title=stored.get("title") or "",
                            last_modified=_utc(stored.get("last_modified")),
                            date_source=stored.get("date_source"), media_type=stored.get("media_type"),
                            score=float(score or 0.0) if sort == "relevance" else 0.0,
                            snippet=snip.text, marks=snip.marks, snippet_note=snip.note))
        return hits


def _fields_of(searcher, docnums: list[int], snippets_for, others_keys_only: bool) -> tuple[list[dict], Container[str] | None]:
    """The stored fields of each of ``docnums`` and the keys ``snippets_for`` chose (None: no
    choice, every hit); with ``others_keys_only``, those not chosen as ``{"key", "source"}``
    from the segments' columns (their readers kept on each segment reader: opening them costs
    ~0.5 ms a segment)."""
    if snippets_for is None or not others_keys_only or not searcher.reader().has_column("source"):
        fields = [searcher.stored_fields(d) for d in docnums]
        return fields, None if snippets_for is None else snippets_for([f["key"] for f in fields])
    leaves = searcher.leaf_searchers()
    offsets = [offset for _sub, offset in leaves]
    columns = []
    for d in docnums:
        sub, offset = leaves[bisect_right(offsets, d) - 1]
        reader = sub.reader()
        kept = reader.__dict__.get("_indexerd_columns")
        if kept is None:
            kept = reader._indexerd_columns = (reader.column_reader("key"), reader.column_reader("source"))
        columns.append((kept, d - offset))
    keys = [key_of[local] for (key_of, _source_of), local in columns]
    chosen = snippets_for(keys)
    return [searcher.stored_fields(d) if k in chosen else {"key": k, "source": source_of[local]}
            for d, k, ((_key_of, source_of), local) in zip(docnums, keys, columns)], chosen


def facets(searchers, query: str | None, since: datetime | None, until: datetime | None,
           fold_diacritics: bool = True) -> dict[str, list[tuple[str, int]]]:
    """Documents of the Whoosh index matching ``query`` (None: all) in the date range, counted
    per value of each field of :data:`~indexerd.index.base.FACET_FIELDS` by Whoosh's grouped
    facets (``groupedby`` with ``Count`` maps: the collector files each matching document by its
    value from the field's column or postings; no stored field is read), most first.

    Raises:
        QueryError: the query is malformed, or its prefixes match too many words.
    """
    from whoosh import query as wq
    from whoosh import sorting

    from indexerd.index.base import FACET_FIELDS

    q = wq.Every() if query is None else compile_query(analysed(query, fold_diacritics))
    if q is None:
        return {name: [] for name in FACET_FIELDS}
    groups = sorting.Facets()
    for name in FACET_FIELDS:
        groups.add_field(name, maptype=sorting.Count)
    with searchers.searcher() as searcher:
        _check_prefixes(q, searcher)
        if query is not None and patches.active():
            from indexerd.index.whoosh.bulkfacets import facet_counts
            from indexerd.index.whoosh.bulkscore import Unsupported

            try:
                counts = facet_counts(searcher, q, tuple(FACET_FIELDS),
                                      allow=searcher._filter_to_comb(date_filter(since, until)))
                return {name: sorted(((v, n) for v, n in counts[name].items() if v), key=lambda p: (-p[1], p[0]))
                        for name in FACET_FIELDS}
            except Unsupported as e:
                log.debug("query %s faceted by Whoosh's collector: %s", q, e)
        results = searcher.search(q, limit=1, scored=False, groupedby=groups,
                                  filter=date_filter(since, until))
        out = {}
        for name in FACET_FIELDS:
            counted = results.groups(name)
            out[name] = sorted(((v if isinstance(v, str) else (v or b"").decode("utf-8", "replace"), n)
                                for v, n in counted.items() if v and n > 0), key=lambda p: (-p[1], p[0]))
        return out


def count_and_facets(searchers, query: str, since: datetime | None, until: datetime | None,
                     fold_diacritics: bool = True) -> tuple[int, dict[str, list[tuple[str, int]]]]:
    """:func:`count` and :func:`facets` of ``query`` from one evaluation of its matches on one
    snapshot (:func:`~indexerd.index.whoosh.bulkfacets.count_and_facet_counts`): an exact
    phrase's candidates were checked twice, once for each (about 1.1 s of a 50,000-document
    page).  Where that cannot evaluate the query, each is counted by Whoosh's collector.

    Raises:
        QueryError: as :func:`count`.
    """
    from indexerd.index.base import FACET_FIELDS

    q = compile_query(analysed(query, fold_diacritics))
    if q is None:
        return 0, {name: [] for name in FACET_FIELDS}
    if patches.active():
        from indexerd.index.whoosh.bulkfacets import count_and_facet_counts
        from indexerd.index.whoosh.bulkscore import Unsupported

        with searchers.searcher() as searcher:
            _check_prefixes(q, searcher)
            try:
                total, counts = count_and_facet_counts(searcher, q, tuple(FACET_FIELDS),
                                                       allow=searcher._filter_to_comb(date_filter(since, until)))
                return total, {name: sorted(((v, n) for v, n in counts[name].items() if v), key=lambda p: (-p[1], p[0]))
                               for name in FACET_FIELDS}
            except Unsupported as e:
                log.debug("query %s counted and faceted by Whoosh's collector: %s", q, e)
    return (count(searchers, query, since, until, fold_diacritics),
            facets(searchers, query, since, until, fold_diacritics))


def similar_terms(searchers, token: str, max_edits: int) -> list[tuple[str, int]]:
    """Terms of ``title`` and ``content`` near ``token`` (:func:`indexerd.index.suggest.near_terms`
    over the terms that begin with its first character, read from the segments' term indexes),
    each with its document frequency (the larger of the two fields'; deleted documents not yet
    merged away still count)."""
    from indexerd.index.suggest import near_terms

    if not token:
        return []
    with searchers.searcher() as searcher:
        reader = searcher.reader()
        found: dict[str, int] = {}
        for field in ("title", "content"):
            lo, hi = len(token) - max_edits, len(token) + max_edits
            words = (w for w in reader.expand_prefix(field, token[0]) if lo <= len(w) <= hi)
            for t in near_terms(token, (w.decode("utf-8") if isinstance(w, bytes) else w for w in words), max_edits):
                found[t] = max(found.get(t, 0), reader.doc_frequency(field, t))
        return list(found.items())
