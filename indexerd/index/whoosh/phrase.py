"""Exact phrases on Whoosh, by position sets instead of span objects.

Whoosh's ``Phrase`` runs ``SpanNear2``: for every document holding all the words it builds a
``Span`` object per position of each word and binary-searches them in Python, which made a
two-word phrase of common words take about a second on 10,000 files (bench/RESULTS.md).  An
exact phrase (``slop`` 1, in order, words next to each other) needs less: word ``k`` of the
phrase must sit at ``start + k``, so the starts are the intersection of the position sets
``{p - k}``, which the set type computes in C.

:class:`ExactPhrase` is a ``whoosh.query.Phrase`` whose matcher does that; documents, order and
scores are those of stock Whoosh (the same intersection matcher underneath, the same spans),
which ``tests/test_whoosh_phrase.py`` checks against ``whoosh.query.Phrase`` itself.
"""

from __future__ import annotations

from itertools import repeat
from operator import sub

from whoosh import matching
from whoosh import query as wq
from whoosh.query.spans import Span, SpanNear2

__all__ = ["ExactPhrase", "ExactSpansMatcher"]


class _ExactSpans(SpanNear2):
    """``SpanNear2`` over term queries, in order, next to each other (slop 1, mindist 1)."""

    def matcher(self, searcher, context=None):
        return ExactSpansMatcher([q.matcher(searcher, context) for q in self.qs])


class ExactSpansMatcher(SpanNear2.SpanNear2Matcher):
    """The matcher of an exact phrase: the words' term matchers ``ms`` intersected (scored as
    their intersection), each document kept where the words stand next to each other, in order
    (:mod:`indexerd.index.whoosh.bulkscore` evaluates it over whole posting lists)."""

    def __init__(self, ms) -> None:
        super().__init__(ms, slop=1, ordered=True, mindist=1)

    def copy(self):
        return self.__class__([m.copy() for m in self.ms])

    def _get_spans(self):
        """The phrase's spans in the current document: the starts ``s`` with word ``k`` at
        ``s + k`` for every ``k``, as ``Span(s, s + len - 1)`` in position order."""
        ms = self.ms
        starts = set(ms[0].value_as("positions"))
        for k in range(1, len(ms)):
            if not starts:
                return []
            starts.intersection_update(map(sub, ms[k].value_as("positions"), repeat(k)))
        last = len(ms) - 1
        return [Span(s, s + last) for s in sorted(starts)]


class ExactPhrase(wq.Phrase):
    """A phrase whose words must be next to each other, in order (``whoosh.query.Phrase`` with
    its default ``slop`` of 1), matched by :class:`ExactSpansMatcher`.  Another ``slop`` is
    left to Whoosh."""

    def matcher(self, searcher, context=None):
        if self.slop != 1:
            return super().matcher(searcher, context)
        fieldname = self.fieldname
        if fieldname not in searcher.schema:
            return matching.NullMatcher()
        field = searcher.schema[fieldname]
        if not field.format or not field.format.supports("positions"):
            raise wq.QueryError(f"Phrase search: {fieldname!r} field has no positions")
        reader = searcher.reader()
        terms = []
        for word in self.words:
            try:
                word = field.to_bytes(word)
            except ValueError:
                return matching.NullMatcher()
            if (fieldname, word) not in reader:
                return matching.NullMatcher()  # a word no document has: no phrase
            terms.append(wq.Term(fieldname, word))
        m = _ExactSpans(terms).matcher(searcher, context)
        if self.boost != 1.0:
            m = matching.WrappingMatcher(m, boost=self.boost)
        return m
