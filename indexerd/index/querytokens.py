"""A parsed query -> the analysed tree every engine compiles (:func:`analyse_query`).

The words of :mod:`indexerd.index.query`'s tree become the index's tokens through the same
analyzer the documents went through (:mod:`indexerd.index.analysis`), so both engines get
exactly the same leaves and only translate them.  The analysed tree holds:

- :class:`Tokens` ``(field, tokens)``: ``field`` (``title``, ``content`` or ``ids``) has these
  tokens at consecutive positions: one token is a term query, several a phrase query.  ``ids``
  (whole identifiers, no positions) only ever gets one token;
- :class:`TokenPrefix` ``(field, prefix)``: a term of ``field`` starts with ``prefix``;
- :class:`~indexerd.index.querytree.Keyword`, :class:`~indexerd.index.querytree.NumberRange`,
  :class:`~indexerd.index.querytree.DateRange` unchanged;
- :class:`~indexerd.index.querytree.And` / :class:`~indexerd.index.querytree.Or` with two or more
  children (nested ones of the same kind flattened);
- :class:`~indexerd.index.querytree.Not` only as a child of an ``And`` that has a positive child
  (a lone ``-x`` becomes ``And((MatchAll(), Not(x)))``);
- :class:`MatchAll` only inside such an ``And``; :class:`MatchNone` only as the whole tree.

How words become leaves (a term without a field searches ``title`` and ``content``, and, to
rank, ``headings``: a document's section headings, a part of its content indexed again in a
field that weighs more (:data:`~indexerd.index.base.HEADINGS_BOOST`), so the leaf never changes
which documents match):

- a word whose analysis gives no token (a stop word, punctuation) is left out; a query left
  with nothing is :class:`MatchNone` (finds nothing, not an error);
- a word giving one token: that term; giving several (``foo-bar``, a CJK word's bigrams): the
  phrase of them;
- a word that is one identifier (``pg_hba.conf``): ``ids:pg_hba.conf OR "pg hba conf"`` -- the
  whole identifier, or its parts as a phrase (so ``pg_hba.conf`` is found where it was written
  ``pg-hba-conf`` too);
- ``"a phrase"``: the phrase of all its tokens (identifiers by their parts);
- ``prefix*``: normalised like a word but not stemmed; a prefix holding ``.`` or ``_`` matches
  whole identifiers (``ids``), any other the terms of the field(s) that start with it, or are the
  stem of a word it likely begins (``runnin*``: also ``run``, :meth:`Analyzer.prefix_stems`).
"""

from __future__ import annotations

from dataclasses import dataclass

from indexerd.index.analysis import Analyzer
from indexerd.index.querytree import (TEXT_FIELDS, And, DateRange, Keyword, Not, NumberRange, Or, Phrase,
                                      Prefix, Word)

IDS_FIELD = "ids"
"""The field of whole identifiers (no positions)."""
HEADINGS_FIELD = "headings"
"""The field of a document's section headings (a part of its content, boosted); not a field a
query may name."""


@dataclass(frozen=True)
class Tokens:
    """``field`` holds ``tokens`` at consecutive positions (one token: a term)."""

    field: str
    tokens: tuple[str, ...]


@dataclass(frozen=True)
class TokenPrefix:
    """A term of ``field`` starts with ``prefix``."""

    field: str
    prefix: str


@dataclass(frozen=True)
class MatchAll:
    """Every document (only beside a :class:`~indexerd.index.querytree.Not` in an ``And``)."""


@dataclass(frozen=True)
class MatchNone:
    """No document: the query had nothing to search (only stop words, say)."""


def analyse_query(tree, analyzer: Analyzer):
    """The analysed tree of a parsed query (module docstring).

    Args:
        tree: what :func:`indexerd.index.query.parse` returned.
        analyzer: the analyzer the index was built with.

    Returns:
        the analysed tree; :class:`MatchNone` when nothing is left to search.
    """
    node = _lower(tree, analyzer)
    if node is None:
        return MatchNone()
    return _place_negations(node)


def _fields(field: str | None) -> tuple[str, ...]:
    return TEXT_FIELDS if field is None else (field,)


def _ranked_fields(field: str | None) -> tuple[str, ...]:
    """The fields a word or phrase searches: :func:`_fields`, and ``headings`` for none."""
    return _fields(field) + ((HEADINGS_FIELD,) if field is None else ())


def _any(nodes: list):
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else Or(tuple(nodes))


def _lower(node, analyzer: Analyzer):
    """The analysed node, or None when nothing of it is left (``Not`` kept where it stands)."""
    if isinstance(node, Word):
        units = [u for u in analyzer.units(node.text) if u.tokens]
        tokens = tuple(t for u in units for t in u.tokens)
        if not tokens:
            return None
        leaves = [Tokens(f, tokens) for f in _ranked_fields(node.field)]
        if len(units) == 1 and units[0].whole is not None and node.field is None:
            leaves.insert(0, Tokens(IDS_FIELD, (units[0].whole,)))
        return _any(leaves)
    if isinstance(node, Phrase):
        tokens = tuple(analyzer.tokens(node.text))
        return _any([Tokens(f, tokens) for f in _ranked_fields(node.field)]) if tokens else None
    if isinstance(node, Prefix):
        prefix = analyzer.normalise_prefix(node.text)
        if not prefix.strip():
            return None
        if "." in prefix or "_" in prefix:
            return TokenPrefix(IDS_FIELD, prefix)
        stems = analyzer.prefix_stems(prefix)  # runnin* -> also the term run (running's stem)
        return _any([leaf for f in _fields(node.field)
                     for leaf in (TokenPrefix(f, prefix), *(Tokens(f, (stem,)) for stem in stems))])
    if isinstance(node, (Keyword, NumberRange, DateRange)):
        return node
    if isinstance(node, Not):
        child = _lower(node.child, analyzer)
        return None if child is None else Not(child)
    if isinstance(node, (And, Or)):
        kind = type(node)
        children: list = []
        for c in node.children:
            low = _lower(c, analyzer)
            if low is None:
                continue
            children.extend(low.children if type(low) is kind else (low,))
        if not children:
            return None
        return children[0] if len(children) == 1 else kind(tuple(children))
    raise TypeError(f"not a query node: {node!r}")


def _place_negations(node):
    """Give every ``Not`` a positive sibling in an ``And`` (``MatchAll`` when it has none)."""
    if isinstance(node, Not):
        return And((MatchAll(), Not(_place_negations(node.child))))
    if isinstance(node, Or):
        return Or(tuple(_place_negations(c) for c in node.children))
    if isinstance(node, And):
        children = tuple(Not(_place_negations(c.child)) if isinstance(c, Not) else _place_negations(c)
                         for c in node.children)
        if all(isinstance(c, Not) for c in children):
            children = (MatchAll(),) + children
        return And(children)
    return node


def highlight_words(tree) -> tuple[set[str], set[str]]:
    """The tokens and prefixes a snippet should show: those of the analysed ``tree``'s text
    leaves (``title``, ``content``, ``ids``) that are not under a ``Not``.

    Returns:
        (tokens, prefixes): analysed tokens (stems, CJK bigrams, whole identifiers), and the
        normalised prefixes of ``prefix*`` terms.
    """
    tokens: set[str] = set()
    prefixes: set[str] = set()

    def walk(n) -> None:
        if isinstance(n, Tokens):
            tokens.update(n.tokens)
        elif isinstance(n, TokenPrefix):
            prefixes.add(n.prefix)
        elif isinstance(n, (And, Or)):
            for c in n.children:
                walk(c)

    walk(tree)
    return tokens, prefixes
