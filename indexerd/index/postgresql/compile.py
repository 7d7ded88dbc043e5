"""The analysed query tree (:mod:`indexerd.index.querytokens`) -> a SQL condition on ``documents``.

Text leaves become ``tsquery`` text in the input syntax (quoted lexemes, taken as they are: no
parser, no dictionary), so they meet the ``tsv`` of :mod:`.documents` token for token:

- ``Tokens`` with one token -> ``'tok':W``; with several -> the phrase ``'a':W <-> 'b':W``,
  where ``W`` is the field's weight (``title`` ``A``, ``content`` ``B``, ``ids`` ``C``);
- ``TokenPrefix`` -> ``'prefix':*W`` (every lexeme starting with it);
- ``And`` / ``Or`` / ``Not`` of text alone stay one ``tsquery`` (``&``, ``|``, ``!``: one GIN
  scan); mixed with fields that are columns they become SQL ``AND`` / ``OR`` / ``NOT`` of
  ``tsv @@ '<tsquery>'`` and the column predicates:
- ``Keyword`` -> ``column = value`` (``key``: its hash, the primary key) or, as a prefix,
  ``starts_with(column, value)``; ``NumberRange`` -> ``size BETWEEN``; ``DateRange`` ->
  ``start <= last_modified < end``; ``MatchAll`` -> ``TRUE``.

A token PostgreSQL cannot hold (over :data:`~.documents.MAX_LEXEME_BYTES`) is in no document: its
leaf is ``FALSE``; an empty token (see :mod:`.documents`) is left out of its phrase.  :func:`rank_tsquery`
is what :func:`ts_rank_cd` scores: the text leaves outside any ``Not``, or'ed.
"""

from __future__ import annotations

from dataclasses import dataclass

from indexerd.index.query import And, DateRange, Keyword, Not, NumberRange, Or
from indexerd.index.querytokens import MatchAll, MatchNone, TokenPrefix, Tokens

from .documents import MAX_LEXEME_BYTES, key_hash, quote_lexeme

#: The ``tsv`` weight of each text field (:mod:`.documents`).
WEIGHTS = {"title": "A", "content": "B", "ids": "C", "headings": "D", "title+content": "AB",
           "title+content+headings": "ABD"}
#: Columns of the keyword fields.
KEYWORD_COLUMNS = {"source": "source", "media_type": "media_type", "date_source": "date_source", "key": "key"}


@dataclass(frozen=True)
class Where:
    """A SQL condition (``%s`` placeholders) and its parameters, in order."""

    sql: str
    params: tuple = ()


def _too_long(token: str) -> bool:
    return len(token.encode("utf-8")) > MAX_LEXEME_BYTES


def _text(node) -> str | None:
    """The ``tsquery`` of a node made of text leaves only, None when it holds another kind (or a
    token no ``tsvector`` can hold)."""
    if isinstance(node, Tokens):
        tokens = [t for t in node.tokens if t]  # "" is in no document (see .documents)
        if not tokens or any(_too_long(t) for t in tokens):
            return None
        w = WEIGHTS[node.field]
        return " <-> ".join(f"{quote_lexeme(t)}:{w}" for t in tokens)
    if isinstance(node, TokenPrefix):
        if not node.prefix or _too_long(node.prefix):
            return None
        return f"{quote_lexeme(node.prefix)}:*{WEIGHTS[node.field]}"
    if isinstance(node, Or):
        merged = _both_fields(node)
        if merged is not None:
            return _text(merged)
        alternatives = [_text(c) for c in node.children]
        texts = [t for t in alternatives if t is not None]
        return None if len(texts) < len(alternatives) else "(" + " | ".join(texts) + ")"
    if isinstance(node, And):
        parts: list[str] = []
        for c in node.children:
            inner = _text(c.child if isinstance(c, Not) else c)
            if inner is None:
                return None
            parts.append("!(" + inner + ")" if isinstance(c, Not) else inner)
        return "(" + " & ".join(parts) + ")"
    return None


def _both_fields(node: Or) -> Tokens | None:
    """``title:x OR content:x OR headings:x`` (what every unfielded word becomes) as one leaf
    on their weights, ``'x':ABD`` (``title:x OR content:x``: ``'x':AB``): the same documents (a
    phrase never spans two fields: :mod:`.documents` leaves a position between them), a third of
    the operands to match and rank."""
    if len(node.children) not in (2, 3) or not all(isinstance(c, Tokens) for c in node.children):
        return None
    fields = {c.field for c in node.children}
    if len({c.tokens for c in node.children}) != 1 or len(fields) != len(node.children):
        return None
    if fields == {"title", "content"}:
        return Tokens("title+content", node.children[0].tokens)
    if fields == {"title", "content", "headings"}:
        return Tokens("title+content+headings", node.children[0].tokens)
    return None


def _match(tsq: str) -> Where:
    return Where("tsv @@ %s::tsquery", (tsq,))


def _join(op: str, parts: list[Where]) -> Where:
    return Where("(" + f" {op} ".join(p.sql for p in parts) + ")", tuple(x for p in parts for x in p.params))


def compile_where(tree) -> Where | None:
    """The SQL condition of an analysed tree; None for :class:`MatchNone` (nothing matches).

    Raises:
        TypeError: ``tree`` holds a node the analysed tree never has (a programming error).
    """
    if isinstance(tree, MatchNone):
        return None
    return _where(tree)


def _where(node) -> Where:
    tsq = _text(node)
    if tsq is not None:
        return _match(tsq)
    if isinstance(node, (Tokens, TokenPrefix)):
        return Where("FALSE")  # a token over PostgreSQL's lexeme limit
    if isinstance(node, Keyword):
        col = KEYWORD_COLUMNS[node.field]
        if node.prefix:
            return Where(f"starts_with({col}, %s)", (node.value,))
        if col == "key":
            return Where("key_hash = %s", (key_hash(node.value),))
        return Where(f"{col} = %s", (node.value,))
    if isinstance(node, NumberRange):
        if node.high is not None and node.high < 0:
            return Where("FALSE")
        parts = []
        if node.low is not None:
            parts.append(Where("size >= %s", (max(0, node.low),)))
        if node.high is not None:
            parts.append(Where("size <= %s", (node.high,)))
        return _join("AND", parts) if parts else Where("TRUE")
    if isinstance(node, DateRange):
        return date_range(node.start, node.end) or Where("TRUE")
    if isinstance(node, MatchAll):
        return Where("TRUE")
    if isinstance(node, Or):
        return _join("OR", [_where(c) for c in node.children])
    if isinstance(node, And):
        return _join("AND", [_negated(_where(c.child)) if isinstance(c, Not) else _where(c)
                             for c in node.children])
    raise TypeError(f"not an analysed query node: {node!r}")


def _negated(w: Where) -> Where:
    return Where(f"NOT ({w.sql})", w.params)


def date_range(start, end) -> Where | None:
    """``start <= last_modified < end`` (aware datetimes; None: open), None when both are open."""
    parts = []
    if start is not None:
        parts.append(Where("last_modified >= %s", (start,)))
    if end is not None:
        parts.append(Where("last_modified < %s", (end,)))
    return _join("AND", parts) if parts else None


def rank_tsquery(tree) -> str | None:
    """The ``tsquery`` ``ts_rank_cd`` scores a hit with: every text leaf outside a ``Not``,
    or'ed; None when the query has none (only fields: every hit scores 0)."""
    leaves: list[str] = []

    def walk(n) -> None:
        if isinstance(n, (Tokens, TokenPrefix)):
            t = _text(n)
            if t is not None:
                leaves.append(t)
        elif isinstance(n, Or) and _both_fields(n) is not None:
            walk(_both_fields(n))
        elif isinstance(n, (And, Or)):
            for c in n.children:
                if not isinstance(c, Not):
                    walk(c)

    walk(tree)
    return " | ".join(dict.fromkeys(leaves)) if leaves else None
