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

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timezone

from indexerd.index.querytree import And, DateRange, Keyword, Not, NumberRange, Or
from indexerd.index.querytokens import MatchAll, MatchNone, TokenPrefix, Tokens

UTC = timezone.utc


def _naive_utc(dt):
    return None if dt is None else dt.astimezone(UTC).replace(tzinfo=None)


_and_not_classes: tuple | None = None
#: set while :func:`unpositioned_and_not` holds: an and-not matcher is built without its first
#: match found (the bulk scorer reads whole posting lists and never walks it)
_unpositioned: ContextVar[bool] = ContextVar("indexerd_unpositioned_and_not", default=False)


@contextmanager
def unpositioned_and_not() -> Iterator[None]:
    """While the block runs (in this thread), :func:`and_not`'s matchers are built without
    moving to their first match: finding it walks the positive side in Python past every
    document the negative side also holds (a second, on 50,000 files, for ``difo -refobo``).
    Such a matcher says so (``unpositioned``) and must not be walked."""
    token = _unpositioned.set(True)
    try:
        yield
    finally:
        _unpositioned.reset(token)


def _make_and_not_classes() -> tuple:
    """``(query class, matcher class)`` of :func:`and_not`, made once (Whoosh imported then)."""
    global _and_not_classes
    if _and_not_classes is None:
        from whoosh import query as wq
        from whoosh.matching import AndNotMatcher

        class _AndNotMatcher(AndNotMatcher):
            unpositioned = False

            def _find_first(self):
                if _unpositioned.get():
                    self.unpositioned = True
                    return
                if self.a.is_active() and self.b.is_active():
                    self._find_next()

        class _AndNot(wq.AndNot):
            def matcher(self, searcher, context=None):
                return _AndNotMatcher(self.a.matcher(searcher, context),
                                      self.b.matcher(searcher, searcher.boolean_context()))

        _and_not_classes = (_AndNot, _AndNotMatcher)
    return _and_not_classes


def and_not(positive, negative):
    """``positive ANDNOT negative`` as a Whoosh query whose matcher tests every positive
    document, the first one included, against ``negative``.

    Whoosh 2.7's ``AndNotMatcher._find_first`` only skips past the first positive document when
    the negative matcher stands *on* it; a negative matcher that starts on an earlier document
    is never advanced to it, so that document matched (``subprocess -shell`` found a page
    holding both words).  The subclass moves the negative matcher first; the rest is Whoosh's.
    """
    return _make_and_not_classes()[0](positive, negative)


def and_not_matcher_class() -> type:
    """The matcher class of :func:`and_not`'s queries (its documents: the positive side's not in
    the negative side's, scored as the positive side scores them)."""
    return _make_and_not_classes()[1]


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
