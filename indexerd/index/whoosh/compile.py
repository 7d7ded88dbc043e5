"""The analysed query tree (:mod:`indexerd.index.querytokens`) -> a ``whoosh.query`` object.

One Whoosh query per node, nothing decided here that another engine would decide otherwise:

- ``Tokens`` with one token -> ``Term``; with several -> ``Phrase`` (the title and content
  fields keep positions; ``ids`` only ever gets one token);
- ``TokenPrefix`` -> ``Prefix``; ``Keyword`` -> ``Term`` or ``Prefix`` on the stored value;
- ``NumberRange`` -> ``NumericRange`` (inclusive); ``DateRange`` -> ``DateRange`` with naive
  UTC bounds (Whoosh's ``DATETIME`` drops tzinfo), start inclusive, end exclusive;
- ``And`` -> ``And`` of its positive children, wrapped in ``AndNot`` for its ``Not`` children;
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
        return wq.Phrase(node.field, list(node.tokens))
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
            q = wq.AndNot(q, negative[0] if len(negative) == 1 else wq.Or(negative))
        return q
    raise TypeError(f"not an analysed query node: {node!r}")
