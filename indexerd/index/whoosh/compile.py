"""The analysed query tree (:mod:`indexerd.index.querytokens`) -> a ``whoosh.query`` object.

One Whoosh query per node, nothing decided here that another engine would decide otherwise:

- ``Tokens`` with one token -> ``Term``; with several -> ``Phrase`` (:class:`~.phrase.ExactPhrase`: the
  same matches, by position sets; the title and content
  fields keep positions; ``ids`` only ever gets one token);
- ``TokenPrefix`` -> ``Prefix``; ``Keyword`` -> ``Term`` or ``Prefix`` on the stored value;
- ``NumberRange`` -> ``NumericRange`` (inclusive); ``DateRange`` -> ``DateRange`` with naive
  UTC bounds (Whoosh's ``DATETIME`` drops tzinfo), start inclusive, end exclusive;
- ``And`` -> ``And`` of its positive children, wrapped in ``AndNot`` for its ``Not`` children
  (:func:`and_not`: Whoosh's own ``AndNotMatcher`` lets the first document of the positive side
  through when the negative side starts before it; ``_AndNotMatcher`` tests it);
  ``Or`` -> ``Or``; ``MatchAll`` -> ``Every``.  ``MatchNone`` is answered by the caller without
  searching (:func:`compile_query` returns None for it).
"""

from __future__ import annotations

from datetime import timezone

from indexerd.index.querytree import And, DateRange, Keyword, Not, NumberRange, Or
from indexerd.index.querytokens import MatchAll, MatchNone, TokenPrefix, Tokens

UTC = timezone.utc


def _naive_utc(dt):
    return None if dt is None else dt.astimezone(UTC).replace(tzinfo=None)


_and_not_class = None


def and_not(positive, negative):
    """``positive ANDNOT negative`` as a Whoosh query whose matcher tests every positive
    document, the first one included, against ``negative``.

    Whoosh 2.7's ``AndNotMatcher._find_first`` only skips past the first positive document when
    the negative matcher stands *on* it; a negative matcher that starts on an earlier document
    is never advanced to it, so that document matched (``subprocess -shell`` found a page
    holding both words).  The subclass moves the negative matcher first; the rest is Whoosh's.
    """
    global _and_not_class
    if _and_not_class is None:
        from whoosh import query as wq
        from whoosh.matching import AndNotMatcher

        class _AndNotMatcher(AndNotMatcher):
            def _find_first(self):
                if self.a.is_active() and self.b.is_active():
                    self._find_next()

        class _AndNot(wq.AndNot):
            def matcher(self, searcher, context=None):
                return _AndNotMatcher(self.a.matcher(searcher, context),
                                      self.b.matcher(searcher, searcher.boolean_context()))

        _and_not_class = _AndNot
    return _and_not_class(positive, negative)


def compile_query(tree):
    """The Whoosh query of an analysed tree, or None for :class:`MatchNone` (nothing matches).

    Raises:
        TypeError: ``tree`` holds a node the analysed tree never has (a programming error).
    """
    if isinstance(tree, MatchNone):
        return None
    return _compile(tree)


def _compile(node):
    from whoosh import query as wq

    if isinstance(node, Tokens):
        if len(node.tokens) == 1:
            return wq.Term(node.field, node.tokens[0])
        from indexerd.index.whoosh.phrase import ExactPhrase

        return ExactPhrase(node.field, list(node.tokens))
    if isinstance(node, TokenPrefix):
        return wq.Prefix(node.field, node.prefix)
    if isinstance(node, Keyword):
        return wq.Prefix(node.field, node.value) if node.prefix else wq.Term(node.field, node.value)
    if isinstance(node, NumberRange):
        return wq.NumericRange(node.field, node.low, node.high)
    if isinstance(node, DateRange):
        return wq.DateRange(node.field, _naive_utc(node.start), _naive_utc(node.end),
                            startexcl=False, endexcl=True)
    if isinstance(node, MatchAll):
        return wq.Every()
    if isinstance(node, Or):
        return wq.Or([_compile(c) for c in node.children])
    if isinstance(node, And):
        positive = [_compile(c) for c in node.children if not isinstance(c, Not)]
        negative = [_compile(c.child) for c in node.children if isinstance(c, Not)]
        q = positive[0] if len(positive) == 1 else wq.And(positive)
        if negative:
            q = and_not(q, negative[0] if len(negative) == 1 else wq.Or(negative))
        return q
    raise TypeError(f"not an analysed query node: {node!r}")
