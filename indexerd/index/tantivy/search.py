"""Reading the tantivy index: searchers, search and count, and the hits they return.

A query is parsed by :mod:`indexerd.index.query` (so a malformed query raises the same
:class:`~indexerd.core.errors.QueryError` on every engine), analysed by
:mod:`indexerd.index.querytokens` and compiled by :mod:`.compile`.  Snippets are cut from the
stored text (``text``) around the query's words by :mod:`indexerd.index.highlight` and
:mod:`indexerd.index.snippets`, the same code as on every engine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container
from datetime import datetime
from pathlib import Path

import tantivy

from indexerd.core.errors import IndexUnavailable
from indexerd.index.analysis import analyzer as shared_analyzer
from indexerd.index.base import Hit, check_sort
from indexerd.index.query import parse
from indexerd.index.querytokens import MatchNone, analyse_query
from indexerd.index.snippets import NO_SNIPPET, SnippetQuery, make_snippet

from .compile import compile_query, date_range
from .schema import stored_fields

log = logging.getLogger(__name__)


class TantivySearch:
    """The read side of :class:`~indexerd.index.tantivy.engine.TantivyIndex`: every call reloads
    the reader first (see the engine's outside contract), so it sees the latest commit of any
    process.  Thread-safe: each call takes its own searcher."""

    def __init__(self, ix: tantivy.Index, path: Path, *, fold_diacritics: bool = True) -> None:
        self._ix: tantivy.Index | None = ix  # None once closed
        self.path = path
        self.schema = ix.schema
        self.fold_diacritics = fold_diacritics
        self.analyzer = shared_analyzer(fold_diacritics=self.fold_diacritics)

    def _analysed(self, query: str):
        return analyse_query(parse(query), self.analyzer)

    def searcher(self) -> tantivy.Searcher:
        """A searcher on the latest commit.

        Raises:
            IndexUnavailable: the index is closed, or its files cannot be read.
        """
        ix = self._ix
        if ix is None:
            raise IndexUnavailable(f"{self.path}: the index is closed")
        for attempt in range(5):
            try:
                ix.reload()
                return ix.searcher()
            except ValueError as e:  # a segment removed between reading meta.json and opening it
                if attempt == 4:
                    raise IndexUnavailable(f"{self.path}: the index cannot be read ({e}); if this "
                                           f"persists, rebuild it with `indexerd index --rebuild`") from None
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _filtered(self, q: tantivy.Query, since: datetime | None, until: datetime | None) -> tantivy.Query:
        """``q`` restricted to ``since <= last_modified < until`` (the range scores nothing)."""
        if since is None and until is None:
            return q
        rng = date_range(self.schema, "last_modified", since, until)
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, q),
                                            (tantivy.Occur.Must, tantivy.Query.const_score_query(rng, 0.0))])

    def search(self, query: str, *, limit: int = 10, since: datetime | None = None,
               until: datetime | None = None, snippet_chars: int = 240,
               sort: str = "relevance",
               snippets_for: Callable[[list[str]], Container[str]] | None = None,
               others_keys_only: bool = False) -> list[Hit]:
        """The best ``limit`` hits of ``query`` with ``since <= last_modified < until`` (aware;
        None: unbounded), by relevance or by date (newest first), with snippets of about
        ``snippet_chars`` characters (``others_keys_only`` is the protocol's; every hit whole).

        Raises:
            QueryError: the query is malformed (raised by the parser, before this engine).
            IndexUnavailable: the index cannot be read.
        """
        check_sort(sort)
        tree = self._analysed(query)
        if isinstance(tree, MatchNone) or limit < 1:  # nothing to search (only stop words), or nothing asked
            return []
        s = self.searcher()
        q = compile_query(tree, self.schema, s)
        if q is None:
            return []
        q = self._filtered(q, since, until)
        if sort == "date":
            found = s.search(q, limit=limit, count=False, order_by_field="last_modified",
                             order=tantivy.Order.Desc).hits
        else:
            found = s.search(q, limit=limit, count=False).hits
        sq = SnippetQuery(tree, self.analyzer)
        fields = [stored_fields(s.doc(addr)) for _score, addr in found]
        chosen = None if snippets_for is None else snippets_for([f["key"] for f in fields])
        hits = []
        for rank, ((score, _addr), f) in enumerate(zip(found, fields), 1):
            snip = make_snippet(f["text"], sq, snippet_chars, title=f["title"]) \
                if chosen is None or f["key"] in chosen else NO_SNIPPET
            hits.append(Hit(rank=rank, key=f["key"], url=f["key"], path=f["path"], source=f["source"],
                            title=f["title"], last_modified=f["last_modified"],
                            date_source=f["date_source"], media_type=f["media_type"],
                            score=float(score) if sort == "relevance" else 0.0,
                            snippet=snip.text, marks=snip.marks, snippet_note=snip.note))
        return hits

    def count(self, query: str | None = None, *, since: datetime | None = None,
              until: datetime | None = None) -> int:
        """How many live documents match ``query`` (None: all) in the date range.

        Raises:
            QueryError: the query is malformed.
            IndexUnavailable: the index cannot be read.
        """
        q = tantivy.Query.all_query() if query is None else compile_query(self._analysed(query), self.schema)
        if q is None:
            return 0
        q = self._filtered(q, since, until)
        s = self.searcher()
        if query is None and since is None and until is None:
            return s.num_docs
        return s.search(q, limit=1, count=True).count  # type: ignore[attr-defined]  # not in tantivy's stubs

    def facets(self, query: str | None = None, *, since: datetime | None = None,
               until: datetime | None = None) -> dict[str, list[tuple[str, int]]]:
        """Matching documents counted per value of each field of
        :data:`~indexerd.index.base.FACET_FIELDS`: tantivy's term dictionary of the raw field
        walked with the query as a filter (``Searcher.terms_with_prefix(field, "",
        filter_query=q)``: each value's documents among the matches, counted in Rust; no stored
        document is read), most first.

        Raises:
            QueryError: the query is malformed.
            IndexUnavailable: the index cannot be read.
        """
        from indexerd.index.base import FACET_FIELDS

        q = tantivy.Query.all_query() if query is None else compile_query(self._analysed(query), self.schema)
        if q is None:
            return {name: [] for name in FACET_FIELDS}
        q = self._filtered(q, since, until)
        s = self.searcher()
        return {name: sorted(((v, n) for v, n in s.terms_with_prefix(name, "", filter_query=q) if v and n > 0),
                             key=lambda p: (-p[1], p[0]))
                for name in FACET_FIELDS}

    def similar_terms(self, token: str, *, max_edits: int = 2) -> list[tuple[str, int]]:
        """Terms of ``title`` and ``content`` near ``token``
        (:func:`indexerd.index.suggest.near_terms` over the term dictionary's terms that begin
        with its first character, ``Searcher.terms_with_prefix``), each with its document
        frequency (the larger of the two fields'; deleted documents not yet merged away still
        count).

        Raises:
            IndexUnavailable: the index cannot be read.
        """
        from indexerd.index.suggest import near_terms

        if not token:
            return []
        s = self.searcher()
        found: dict[str, int] = {}
        lo, hi = len(token) - max_edits, len(token) + max_edits
        for field in ("title", "content"):
            counts = dict((t, n) for t, n in s.terms_with_prefix(field, token[0]) if lo <= len(t) <= hi)
            for t in near_terms(token, counts, max_edits):
                found[t] = max(found.get(t, 0), counts[t])
        return list(found.items())
