"""A document's preview for the search page's ``/doc``: its stored text (what snippets are cut
from, at most :data:`~indexerd.index.base.SNIPPET_TEXT_CAP_BYTES`) with the query's matches
marked the way snippets mark them (:func:`indexerd.index.snippets.mark_all`: the index's own
analysis, whole tokens, phrases only where adjacent).

The text comes from the index through the ordinary, bounded search (``key:"KEY"`` with a
snippet as wide as the text kept), so every engine serves it the same way, its lines kept (the
stored text has a document's lines, whitespace collapsed inside each, blank lines dropped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from indexerd.core.errors import QueryError
from indexerd.index.base import SNIPPET_TEXT_CAP_BYTES
from indexerd.index.snippets import Snippet, SnippetQuery, mark_all

#: characters of stored text a preview asks for: the whole text kept for snippets
PREVIEW_CHARS = SNIPPET_TEXT_CAP_BYTES


@dataclass(frozen=True)
class Preview:
    """``text`` (the stored text), ``marks`` (``[start, end)`` character offsets of what the
    query matched, ascending), ``note`` why nothing is marked (or None), ``query_error`` the
    query's own error when it is malformed (the text is then unmarked)."""

    text: str
    marks: tuple[tuple[int, int], ...] = ()
    note: str | None = None
    query_error: str | None = None


def key_query(key: str) -> str | None:
    """The query matching exactly the document ``key`` (``key:"KEY"``); None for a key the
    query language cannot quote (one holding ``"``: keys are percent-encoded URIs, so none
    indexerd writes does)."""
    return None if '"' in key or not key else f'key:"{key}"'


def document_preview(search: Callable, key: str, query: str, analyzer) -> Preview | None:
    """The preview of document ``key`` for ``query`` (empty: nothing marked), or None when
    the index holds no such document.

    Args:
        search: runs a :class:`indexerd.daemon.queries.SearchRequest`, returning its
            :class:`~indexerd.daemon.queries.SearchResult` (the daemon's bounded runner).
        analyzer: the index's :class:`indexerd.index.analysis.Analyzer`.

    Raises:
        QueryTimeout, IndexUnavailable: as the search.
    """
    from indexerd.daemon.queries import SearchRequest

    exact = key_query(key)
    if exact is None:
        return None
    hits = search(SearchRequest(query=exact, limit=1, snippet_chars=PREVIEW_CHARS)).hits
    if not hits:
        return None
    hit = hits[0]
    if not query.strip():
        return Preview(hit.snippet)
    try:
        snip: Snippet = mark_all(hit.snippet, snippet_query(query, analyzer), title=hit.title or "")
    except QueryError as e:
        return Preview(hit.snippet, query_error=str(e))
    return Preview(snip.text, snip.marks, snip.note)


def snippet_query(query: str, analyzer) -> SnippetQuery:
    """What ``query`` marks in a text (its words, phrases and prefixes, analysed as the index
    analysed the text).

    Raises:
        QueryError: the query is malformed.
    """
    from indexerd.index.query import parse
    from indexerd.index.querytokens import analyse_query

    return SnippetQuery(analyse_query(parse(query), analyzer), analyzer)
