"""The product's query tree (:mod:`indexerd.index.query`, analysed by
:mod:`indexerd.index.querytokens`) compiled to tantivy queries.

- ``And``: every positive child is a ``Must`` clause and every ``Not`` child a ``MustNot``
  clause; ``Or``: ``Should`` clauses (at least one matches); a ``Not`` that is not directly in an
  ``And`` is "every document but": ``Must(all) MustNot(child)``;
- text terms (no field: title or content, title boosted like the Whoosh engine's
  ``field_boost=3``): one token is a term query, several tokens of one typed word (identifier
  parts, CJK bigrams) a phrase query, or'ed with the whole identifier in ``ids``; a prefix is a
  regex query on the term dictionary (every matching term, no expansion limit);
- ``Keyword``: a term (or prefix) of the raw ``key``/``source``/``media_type``/``date_source``;
- ``NumberRange`` on ``size``: an inclusive range of unsigned integers; ``DateRange`` on
  ``last_modified``: ``start <= t < end``.

A term the analyzer drops entirely (a stop word) is left out of its ``And``/``Or``/``Not``, as
the query language says; a query left with nothing compiles to tantivy's empty query, which
matches nothing.
"""

from __future__ import annotations

import tantivy

from indexerd.index import query as qt
from indexerd.index.analysis import Analyzer

#: Title matches weigh three times content matches (as the Whoosh engine's ``field_boost``).
TITLE_BOOST = 3.0
_REGEX_META = set("\\.+*?()|[]{}^$#&-~\"")

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


class Compiler:
    """Compiles query trees against one schema, analysing their words with ``analyzer``.

    ``highlight`` collects the tokens of the positive text terms compiled (for snippets).
    """

    def __init__(self, schema: tantivy.Schema, analyzer: Analyzer) -> None:
        self.schema = schema
        self.analyzer = analyzer
        self.highlight: list[str] = []
        self._negated = 0  # inside how many Not: their words are not highlighted

    def compile_top(self, tree) -> tantivy.Query:
        """The query of a whole tree; tantivy's empty query when nothing is left to search."""
        q = self.compile(tree)
        return Q.empty_query() if q is None else q

    def compile(self, node) -> tantivy.Query | None:
        """The query of ``node``, or None when nothing is left of it to search."""
        if isinstance(node, qt.And):
            return self._and(node.children)
        if isinstance(node, qt.Or):
            qs = [q for q in (self._positive(c) for c in node.children) if q is not None]
            return None if not qs else qs[0] if len(qs) == 1 else Q.boolean_query([(Occur.Should, q) for q in qs])
        if isinstance(node, qt.Not):
            return self._positive(node)
        if isinstance(node, qt.Keyword):
            return self._keyword(node)
        if isinstance(node, qt.NumberRange):
            return Q.range_query(self.schema, node.field, tantivy.FieldType.Unsigned,
                                 lower_bound=None if node.low is None else max(0, node.low),
                                 upper_bound=node.high, include_lower=True, include_upper=True)
        if isinstance(node, qt.DateRange):
            return date_range(self.schema, node.field, node.start, node.end)
        return self.text(node)

    def _positive(self, node) -> tantivy.Query | None:
        """``node`` as a query that matches by itself (a bare ``Not`` becomes all-but)."""
        if isinstance(node, qt.Not):
            inner = self._negative(node.child)
            return None if inner is None else Q.boolean_query([(Occur.Must, Q.all_query()),
                                                               (Occur.MustNot, inner)])
        return self.compile(node)

    def _negative(self, node) -> tantivy.Query | None:
        self._negated += 1
        try:
            return self.compile(node)
        finally:
            self._negated -= 1

    def _and(self, children) -> tantivy.Query | None:
        clauses = []
        for c in children:
            negative = isinstance(c, qt.Not)
            q = self._negative(c.child) if negative else self.compile(c)
            if q is not None:
                clauses.append((Occur.MustNot if negative else Occur.Must, q))
        if not clauses:
            return None
        if all(occur == Occur.MustNot for occur, _ in clauses):
            clauses.insert(0, (Occur.Must, Q.all_query()))
        elif len(clauses) == 1:
            return clauses[0][1]
        return Q.boolean_query(clauses)

    def _keyword(self, node) -> tantivy.Query:
        if node.prefix:
            return Q.regex_query(self.schema, node.field, regex_escape(node.value) + ".*")
        return Q.term_query(self.schema, node.field, node.value)

    # -- text --------------------------------------------------------------------------------
    def _fields(self, field: str | None) -> list[tuple[str, float]]:
        if field is None:
            return [("title", TITLE_BOOST), ("content", 1.0)]
        return [(field, TITLE_BOOST if field == "title" else 1.0)]

    def _either(self, queries: list[tantivy.Query]) -> tantivy.Query:
        if len(queries) == 1:
            return queries[0]
        return Q.boolean_query([(Occur.Should, q) for q in queries])

    def tokens(self, tokens: list[str], field: str | None, whole: str | None = None) -> tantivy.Query | None:
        """The query for one typed word or phrase analysed into ``tokens`` (in order): the
        term, or the phrase of the tokens, in each field; or'ed with ``whole`` (an identifier as
        typed, analysed) in ``ids`` when given and no field is named."""
        if not tokens and not whole:
            return None
        per_field = []
        for name, boost in self._fields(field):
            if not tokens:
                continue
            if len(tokens) == 1:
                q = Q.term_query(self.schema, name, tokens[0])
            else:
                q = Q.phrase_query(self.schema, name, list(tokens))
            per_field.append(Q.boost_query(q, boost) if boost != 1.0 else q)
        if whole and field is None:
            per_field.append(Q.term_query(self.schema, "ids", whole))
        return self._either(per_field)

    def prefix(self, prefix: str, field: str | None) -> tantivy.Query | None:
        """Every term starting with ``prefix`` (already normalised) in each field."""
        if not prefix:
            return None
        pattern = regex_escape(prefix) + ".*"
        per_field = []
        for name, boost in self._fields(field):
            q = Q.regex_query(self.schema, name, pattern)
            per_field.append(Q.boost_query(q, boost) if boost != 1.0 else q)
        if field is None:  # pg_hba* finds pg_hba.conf, whose parts are separate tokens
            per_field.append(Q.regex_query(self.schema, "ids", pattern))
        return self._either(per_field)

    def text(self, node) -> tantivy.Query | None:
        """A ``Word``, ``Phrase`` or ``Prefix``, analysed as the documents are."""
        if isinstance(node, qt.Prefix):
            prefix = self.analyzer.normalise_prefix(node.text)
            if not self._negated:
                self.highlight.append(prefix)
            return self.prefix(prefix, node.field)
        units = self.analyzer.units(node.text)
        tokens = [t for u in units for t in u.tokens]
        whole = units[0].whole if isinstance(node, qt.Word) and len(units) == 1 else None
        if not self._negated:
            self.highlight.extend(tokens)
        return self.tokens(tokens, node.field, whole)
