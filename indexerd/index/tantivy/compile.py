"""The analysed query tree (:mod:`indexerd.index.querytokens`) -> a tantivy query.

One tantivy query per node, nothing decided here that another engine would decide otherwise:

- ``Tokens`` with one token -> a term query; with several -> a phrase query (``title`` and
  ``content`` keep positions; ``ids`` only ever gets one token).  A phrase of ``content`` is
  answered through its word pairs (``content_pairs``, :mod:`.pairs`): two tokens -> the one
  pair's term query, the same documents as the positional phrase without reading a position,
  boosted to the phrase's BM25 weight (:func:`~.pairs.pair_boost`, when the caller gives the
  searcher's statistics); three or more -> the positional phrase, its candidates first narrowed
  to the documents holding all its pairs (a filter that scores 0).  ``title`` is boosted 3x, as
  the Whoosh engine's ``field_boost``, and ``headings`` as much (:data:`TANTIVY_HEADINGS_BOOST`);
- ``TokenPrefix`` -> a regex query ``<prefix>.*`` on the term dictionary (every matching term:
  tantivy's phrase-prefix query would stop at 50 expansions);
- ``Keyword`` -> a term (or the same prefix regex) on the raw stored value;
- ``NumberRange`` -> an inclusive range of unsigned integers; ``DateRange`` -> ``start <= t <
  end`` (aware UTC; an open side is unbounded);
- ``And`` -> ``Must`` clauses for its positive children, ``MustNot`` for its ``Not`` children;
  ``Or`` -> ``Should`` clauses (at least one matches); ``MatchAll`` -> every document.
  ``MatchNone`` is answered by the caller without searching (:func:`compile_query` returns None).
"""

from __future__ import annotations

import tantivy

from indexerd.index.querytree import And, DateRange, Keyword, Not, NumberRange, Or
from indexerd.index.querytokens import MatchAll, MatchNone, TokenPrefix, Tokens

from .pairs import pair_boost, phrase_pairs

#: Title matches weigh three times content matches (as the Whoosh engine's ``field_boost``).
TITLE_BOOST = 3.0
#: Headings weigh as the title here, not :data:`~indexerd.index.base.HEADINGS_BOOST`: tantivy's
#: boost multiplies a field's whole BM25 score, where Whoosh's ``field_boost`` weighs the term's
#: frequency before BM25 saturates it, so the same 3x title made titles weigh more here than on
#: Whoosh; and a page's headings field (every section's heading) is long beside its one-line
#: title, so BM25's length normalisation already discounts a heading match.  At 2x the judged
#: set of issue 34 had one page below rank 3 that Whoosh ranks 1st (bench/RESULTS.md).
TANTIVY_HEADINGS_BOOST = TITLE_BOOST
#: Query-time boosts by field.
_BOOSTS = {"title": TITLE_BOOST, "headings": TANTIVY_HEADINGS_BOOST}
#: The field whose phrases are answered through word pairs, and the field holding its pairs.
PAIRED_FIELD, PAIRS_FIELD = "content", "content_pairs"
_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~\"")

Occur = tantivy.Occur
Q = tantivy.Query


def date_range(schema: tantivy.Schema, field: str, start, end) -> tantivy.Query:
    """``start <= field < end`` (aware datetimes; None: open on that side)."""
    return Q.range_query(schema, field, tantivy.FieldType.Date, lower_bound=start, upper_bound=end,
                         include_lower=True, include_upper=end is None)


def regex_escape(text: str) -> str:
    """``text`` as a literal in tantivy's regex syntax (Rust ``regex``: every ASCII punctuation
    character may be escaped; the meta characters must be)."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def compile_query(tree, schema: tantivy.Schema, stats: tantivy.Searcher | None = None) -> tantivy.Query | None:
    """The tantivy query of an analysed tree, or None for :class:`MatchNone` (nothing matches).

    ``stats``: the searcher the query will run on, whose document frequencies weigh a two-word
    content phrase as its positional phrase would be weighed; None (a count, the facets: no
    score is read) leaves the pair term's own BM25 weight (the same documents).

    Raises:
        TypeError: ``tree`` holds a node the analysed tree never has (a programming error).
    """
    if isinstance(tree, MatchNone):
        return None
    return _compile(tree, schema, stats)


def phrase(schema: tantivy.Schema, field: str, tokens: tuple[str, ...],
           stats: tantivy.Searcher | None = None) -> tantivy.Query:
    """The query of the phrase ``tokens`` (two or more) in ``field``: in :data:`PAIRED_FIELD`
    through its word pairs (see the module docstring), elsewhere tantivy's positional phrase."""
    if field != PAIRED_FIELD:
        return Q.phrase_query(schema, field, list(tokens))
    pairs = phrase_pairs(tokens)
    if len(tokens) == 2:  # its one pair holds exactly the phrase's documents
        q = Q.term_query(schema, PAIRS_FIELD, pairs[0])
        if stats is None:
            return q
        boost = pair_boost([stats.doc_freq(field, t) for t in tokens], stats.doc_freq(PAIRS_FIELD, pairs[0]),
                           stats.num_docs)
        return Q.boost_query(q, boost)
    candidates = Q.boolean_query([(Occur.Must, Q.term_query(schema, PAIRS_FIELD, p)) for p in pairs])
    return Q.boolean_query([(Occur.Must, Q.phrase_query(schema, field, list(tokens))),
                            (Occur.Must, Q.const_score_query(candidates, 0.0))])


def _compile(node, schema: tantivy.Schema, stats: tantivy.Searcher | None) -> tantivy.Query:
    if isinstance(node, Tokens):
        if len(node.tokens) == 1:
            q = Q.term_query(schema, node.field, node.tokens[0])
        else:
            q = phrase(schema, node.field, node.tokens, stats)
        boost = _BOOSTS.get(node.field)
        return Q.boost_query(q, boost) if boost is not None else q
    if isinstance(node, TokenPrefix):
        q = Q.regex_query(schema, node.field, regex_escape(node.prefix) + ".*")
        return Q.boost_query(q, TITLE_BOOST) if node.field == "title" else q
    if isinstance(node, Keyword):
        if node.prefix:
            return Q.regex_query(schema, node.field, regex_escape(node.value) + ".*")
        return Q.term_query(schema, node.field, node.value)
    if isinstance(node, NumberRange):
        if node.high is not None and node.high < 0:  # size:<0: no size is below 0
            return Q.empty_query()
        return Q.range_query(schema, node.field, tantivy.FieldType.Unsigned,
                             lower_bound=None if node.low is None else max(0, node.low),
                             upper_bound=node.high, include_lower=True, include_upper=True)
    if isinstance(node, DateRange):
        return date_range(schema, node.field, node.start, node.end)
    if isinstance(node, MatchAll):
        return Q.all_query()
    if isinstance(node, Or):
        return Q.boolean_query([(Occur.Should, _compile(c, schema, stats)) for c in node.children])
    if isinstance(node, And):
        return Q.boolean_query([(Occur.MustNot, _compile(c.child, schema, stats)) if isinstance(c, Not)
                                else (Occur.Must, _compile(c, schema, stats)) for c in node.children])
    raise TypeError(f"not an analysed query node: {node!r}")
